"""Plain greedy generation: every setting a checkpoint may ship, held at the value that means "off".

A model's ``generation_config`` can carry sampling knobs, penalties, banned or forced tokens, a
watermark, a guidance scale, a cache implementation, compile options or assisted decoding. Any
of them would change what is measured, so the benchmark never starts from it: each run gets a
fresh config holding only the model's special tokens, with every other knob spelled out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import GenerationConfig, PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["GREEDY_OFF", "greedy_config", "non_greedy_settings"]

# Each setting of GenerationConfig (4.55 and 5.x) at its "off" value, grouped as transformers documents them.
# Sampling knobs are off at their neutral values rather than None: greedy ignores them either way, but any
# other value makes transformers warn on every call.
GREEDY_OFF: dict[str, Any] = {
    # strategy: one greedy beam, no sampling, no contrastive/DoLa/constrained search, no multi-token prediction
    "do_sample": False, "num_beams": 1, "num_beam_groups": 1, "diversity_penalty": 0.0, "penalty_alpha": None,
    "dola_layers": None, "constraints": None, "force_words_ids": None, "length_penalty": 1.0,
    "early_stopping": False, "num_return_sequences": 1, "use_mtp": False,
    # sampling
    "temperature": 1.0, "top_k": 50, "top_p": 1.0, "min_p": None, "top_h": None, "typical_p": 1.0,
    "epsilon_cutoff": 0.0, "eta_cutoff": 0.0,
    # logits processors
    "repetition_penalty": 1.0, "encoder_repetition_penalty": 1.0, "no_repeat_ngram_size": 0,
    "encoder_no_repeat_ngram_size": 0, "bad_words_ids": None, "sequence_bias": None, "suppress_tokens": None,
    "begin_suppress_tokens": None, "forced_bos_token_id": None, "forced_eos_token_id": None,
    "exponential_decay_length_penalty": None, "renormalize_logits": False, "remove_invalid_values": False,
    "guidance_scale": None, "watermarking_config": None, "token_healing": False, "low_memory": None,
    # stopping: only the token count ends a run
    "stop_strings": None, "max_time": None,
    # assisted and speculative decoding
    "prompt_lookup_num_tokens": None, "max_matching_ngram_size": None, "assistant_early_exit": None,
    "num_assistant_tokens": 20, "num_assistant_tokens_schedule": "constant", "assistant_confidence_threshold": 0.4,
    "assistant_lookbehind": 10, "target_lookbehind": 10, "assistant_ensemble_weight": None,
    "speculation_type": None, "is_assistant": False,
    # cache and compilation: a strategy sets its own on top of these
    "cache_config": None, "max_cache_len": None, "prefill_chunk_size": None, "return_legacy_cache": None,
    "compile_config": None, "disable_compile": True, "continuous_batching_config": None,
    # outputs
    "output_attentions": False, "output_hidden_states": False, "output_scores": False, "output_logits": False,
    "return_dict_in_generate": False,
}  # fmt: skip
_TOKENS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")
# Settings a checkpoint may ship that a fresh config already holds at "off" (min_length: 0 in 4.55, unset in
# 5.x, where setting it makes transformers warn beside min_new_tokens), or that each strategy states itself.
_ALSO_REPORTED = {"min_length": 0, "cache_implementation": None}


def greedy_config(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, new_tokens: int, use_cache: bool
) -> GenerationConfig:
    """A fresh config for exactly ``new_tokens`` greedy tokens: the model's special tokens, nothing else of its own.

    The cache implementation is stated (``dynamic`` when cached), because transformers 4.55 otherwise
    falls back to one named in the model config; compilation is off, because transformers compiles
    any compileable cache by itself on CUDA. A strategy that wants either sets it on top.
    """
    from transformers import GenerationConfig

    config = GenerationConfig()
    own = model.generation_config
    for key in _TOKENS:
        setattr(config, key, getattr(own, key, None))
    for key, value in GREEDY_OFF.items():
        if hasattr(config, key):  # each line knows only its own settings
            setattr(config, key, value)
    config.min_new_tokens = new_tokens
    config.max_new_tokens = new_tokens
    config.use_cache = use_cache
    config.cache_implementation = "dynamic" if use_cache else None
    if config.pad_token_id is None:
        config.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    return config


def non_greedy_settings(model: PreTrainedModel) -> dict[str, Any]:
    """The settings the model ships that differ from plain greedy decoding, which the benchmark overrides.

    Worth recording beside a result (as plain JSON values): someone running the model with its own
    defaults gets other tokens, or another speed, than the benchmark measured. A cache
    implementation named in the model config itself (which transformers 4.55 falls back to) is
    listed as ``config.cache_implementation``.
    """
    own = model.generation_config
    found = {}
    for key, off in GREEDY_OFF.items():
        value = getattr(own, key, None)
        if key == "disable_compile" or value is None or value == off:
            continue
        found[key] = _plain(value)
    for key, off in _ALSO_REPORTED.items():
        if getattr(own, key, None) not in (None, off):
            found[key] = _plain(getattr(own, key))
    text_config = model.config.get_text_config()
    if getattr(text_config, "cache_implementation", None) is not None:
        found["config.cache_implementation"] = text_config.cache_implementation
    return found


def _plain(value: Any) -> Any:
    """A value as JSON holds it, so the settings can go into a result's metadata as they are."""
    if hasattr(value, "to_dict"):  # WatermarkingConfig, CompileConfig
        return value.to_dict()
    if isinstance(value, (tuple, list)):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    return value
