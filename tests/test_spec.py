"""A benchmark's request (``BenchSpec``) read by its own checks, without a front end: each refusal names the
parameters it is about (a front end spells them as its flags), says the fix in words, and takes what it should.
What it keeps, records and writes back is what the runner, a saved result and a comparison read."""

from __future__ import annotations

import math

import pytest

from kvmagic.addons.prefix.prefix_request import MARKED
from kvmagic.core import spec as spec_module
from kvmagic.core.sequential import first_stop
from kvmagic.core.spec import KV_BITS, BenchSpec, check_field
from kvmagic.core.strategy import DYNAMIC, OFF, parse
from kvmagic.errors import KVMagicError

FIELDS = (  # the centre's, then each add-on's
    "new_tokens, prompt_tokens, warmup_tokens, repeat, ci_target, auto_cap, chat, max_seconds, cache, "
    "kv_bits, compile, steps, threads, batch, quality, quality_text, limits, predict, frontier, prefix"
)


def refusal(**given: object) -> KVMagicError:
    with pytest.raises(KVMagicError) as caught:
        BenchSpec.of(**given)
    return caught.value


def field_refusal(name: str, value: object) -> KVMagicError:
    with pytest.raises(KVMagicError) as caught:
        check_field(name, value)
    return caught.value


def flags(error: KVMagicError) -> str:
    """The message as a front end spells it: each parameter as ``--its-flag``."""
    return error.spelled(lambda name: "--" + name.replace("_", "-"))


# ---- an unknown option -------------------------------------------------------------------------------------------


def test_an_unknown_option_is_refused_by_the_first_name_and_the_list_of_known_ones() -> None:
    with pytest.raises(KVMagicError) as caught:
        BenchSpec.of(zeta=1, alpha=2)
    assert str(caught.value) == f"unknown benchmark option 'alpha': use one of {FIELDS}"


def test_of_changes_only_what_it_is_given() -> None:
    assert BenchSpec.of() == BenchSpec()
    base = BenchSpec(new_tokens=8, repeat=3)
    changed = BenchSpec.of(base, chat=True)
    assert (changed.new_tokens, changed.repeat, changed.chat) == ((8,), 3, True)
    assert BenchSpec.of(None, repeat=2) == BenchSpec(repeat=2)


# ---- options that contradict each other --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bits", "backend"), [(2, "quanto"), (4, "quanto"), (1, "hqq"), (3, "hqq"), (8, "hqq"), (16, "quanto")]
)
def test_kv_bits_without_a_comparison_suggests_a_backend_that_takes_that_width(bits: int, backend: str) -> None:
    error = refusal(kv_bits=bits)
    assert error.params == ("kv_bits", "cache")
    assert flags(error) == f"--kv-bits is the width of a quantized cache: add e.g. --cache off,quantized:{backend}"
    if bits in sum(KV_BITS.values(), ()):
        assert bits in KV_BITS[backend]
        assert BenchSpec(kv_bits=bits, cache="off,quantized:" + backend).kv_bits == bits
    else:  # no backend takes it: refused once the cache is named too, before any model loads
        widths = ", ".join(map(str, KV_BITS[backend]))
        assert flags(refusal(kv_bits=bits, cache="off,quantized:" + backend)) == (
            f"--kv-bits {bits} is not a width {backend} takes: use one of {widths}"
        )


def test_compile_without_a_comparison_asks_for_a_static_cache() -> None:
    error = refusal(compile=True)
    assert error.params == ("compile", "cache")
    assert flags(error) == "--compile compiles a static cache: add e.g. --cache off,static"
    assert BenchSpec(compile=True, cache="off,static").compile


@pytest.mark.parametrize(("given", "name", "shown"), [({"predict": True}, "predict", "--predict"),
                                                      ({"repeat": "auto"}, "repeat", "--repeat auto")])  # fmt: skip
def test_what_only_the_plain_run_does_is_refused_with_a_comparison(given: dict, name: str, shown: str) -> None:
    error = refusal(cache="off,dynamic", **given)
    assert error.params == (name, "cache")
    assert flags(error) == f"{shown} compares the cache off against on: drop it, or drop --cache"
    assert BenchSpec.of(**given).cache is None


@pytest.mark.parametrize(("given", "name", "shown"), [({"predict": True}, "predict", "--predict"),
                                                      ({"repeat": "auto"}, "repeat", "--repeat auto")])  # fmt: skip
def test_what_only_the_plain_run_does_is_refused_with_a_prefix(given: dict, name: str, shown: str) -> None:
    error = refusal(prefix=4, **given)
    assert error.params == (name, "prefix")
    assert flags(error) == f"{shown} compares the cache off against on: drop it, or drop --prefix"


def test_a_text_to_judge_along_needs_a_comparison_with_quality_on() -> None:
    error = refusal(quality_text="Once upon a time")
    assert error.params == ("quality_text", "cache")
    assert flags(error) == "--quality-text judges cache strategies: add e.g. --cache dynamic,quantized:quanto"
    error = refusal(quality_text="Once upon a time", cache="off,dynamic", quality=False)
    assert error.params == ("quality_text", "quality")
    assert flags(error) == "--quality-text needs --quality: drop --quality-text, or turn --quality back on"
    assert BenchSpec(quality_text="Once", cache="off,dynamic").quality_text == "Once"


def test_a_plain_prompts_length_and_chat_are_refused_together() -> None:
    error = refusal(chat=True, prompt_tokens=16)
    assert error.params == ("prompt_tokens", "chat")
    assert flags(error) == "--prompt-tokens sets the plain prompt's length; --chat would wrap it: drop one of them"
    assert BenchSpec(chat=True).chat and BenchSpec(prompt_tokens=16).prompt_tokens == (16,)


@pytest.mark.parametrize(("given", "name", "what"), [({"chat": True}, "chat", "would wrap"),
                                                     ({"prompt_tokens": 8}, "prompt_tokens", "would stretch")])  # fmt: skip
def test_a_marked_prefix_cannot_be_cut_from_a_wrapped_or_stretched_prompt(given: dict, name: str, what: str) -> None:
    error = refusal(prefix=MARKED, **given)
    assert error.params == ("prefix", name)
    said = flags(error)
    assert (
        said == f"--prefix marked cuts at the prompt's line ---; --{name.replace('_', '-')} {what} it: use --prefix N"
    )
    assert len(said) <= 100  # one line of a 100-column terminal, as _check_across promises
    assert BenchSpec.of(prefix=4, **given).prefix == 4


def test_a_marked_prefix_alone_and_chat_off_are_taken() -> None:
    assert BenchSpec.of(prefix=MARKED, chat=False).prefix == MARKED
    assert BenchSpec.of(prefix=" Marked ").prefix == MARKED


# ---- one field at a time -----------------------------------------------------------------------------------------


def test_lengths_take_a_number_a_list_or_the_grammar_and_drop_repeats_in_order() -> None:
    assert check_field("new_tokens", 8) == (8,)
    assert check_field("new_tokens", [32, 8, 32]) == (32, 8)
    assert check_field("new_tokens", "8,16") == (8, 16)
    assert check_field("prompt_tokens", None) is None
    assert check_field("prompt_tokens", (4, 4)) == (4,)
    assert check_field("batch", 1) == (1,)


@pytest.mark.parametrize("name", ["new_tokens", "prompt_tokens", "batch"])
def test_a_length_is_a_whole_number_from_one(name: str) -> None:
    error = field_refusal(name, [])
    assert (error.template, error.params) == (f"{{{name}}} needs at least one length", (name,))
    for bad in (0, -3, 2.5, True):
        error = field_refusal(name, [4, bad])
        assert (error.template, error.params) == (f"{{{name}}} must be a whole number >= 1, got {bad!r}", (name,))
    error = field_refusal(name, 0)
    assert str(error) == f"{name} must be a whole number >= 1, got 0"
    for bad in (2.5, True):  # one value that is not a length: refused, not a TypeError
        assert str(field_refusal(name, bad)) == f"{name} must be a whole number >= 1, got {bad!r}"


def test_warm_up_tokens_may_be_none_at_all() -> None:
    assert check_field("warmup_tokens", 0) == 0
    error = field_refusal("warmup_tokens", -1)
    assert (str(error), error.params) == ("warmup_tokens must be a whole number >= 0, got -1", ("warmup_tokens",))
    assert str(field_refusal("warmup_tokens", False)) == "warmup_tokens must be a whole number >= 0, got False"


def test_repeat_is_a_count_from_one_or_auto_in_any_case() -> None:
    assert check_field("repeat", 1) == 1 and check_field("repeat", 7) == 7
    assert check_field("repeat", " AUTO ") == "auto" and check_field("repeat", "auto") == "auto"
    for bad in ("often", 0, -1, True, 2.0):
        error = field_refusal("repeat", bad)
        assert (error.template, error.params) == (
            f"{{repeat}} must be a whole number >= 1 or 'auto', got {bad!r}",
            ("repeat",),
        )


@pytest.mark.parametrize(("name", "zero"), [("max_seconds", " (0: no limit)"), ("auto_cap", "")])
def test_seconds_are_a_finite_number_from_zero(name: str, zero: str) -> None:
    assert check_field(name, 0) == 0.0 and type(check_field(name, 0)) is float
    assert check_field(name, 2.5) == 2.5
    for bad in (-0.5, math.inf, math.nan, True, "5"):
        error = field_refusal(name, bad)
        assert (error.template, error.params) == (
            f"{{{name}}} must be a number of seconds >= 0{zero}, got {bad!r}",
            (name,),
        )


def test_a_fraction_lies_strictly_between_zero_and_one() -> None:
    assert check_field("ci_target", 0.05) == 0.05
    assert type(check_field("ci_target", 0.5)) is float
    for bad in (0, 1, 1.5, -0.1, True, "0.1"):
        error = field_refusal("ci_target", bad)
        assert (error.template, error.params) == (
            f"{{ci_target}} must be a fraction between 0 and 1, e.g. 0.05 for ±5%, got {bad!r}",
            ("ci_target",),
        )


@pytest.mark.parametrize("name", ["chat", "predict", "compile", "steps", "limits", "quality"])
def test_a_switch_is_true_or_false_and_nothing_else(name: str) -> None:
    assert check_field(name, True) is True and check_field(name, False) is False
    error = field_refusal(name, 1)
    assert (error.template, error.params) == (f"{{{name}}} must be True or False, got 1", (name,))


def test_strategies_are_read_and_a_comparison_needs_one_besides_the_reference() -> None:
    assert check_field("cache", None) is None
    assert check_field("cache", "off,dynamic") == (OFF, DYNAMIC)
    assert check_field("cache", "dynamic") == (DYNAMIC,)
    assert check_field("cache", [OFF, parse("static")]) == (OFF, parse("static"))
    error = field_refusal("cache", "")
    assert (error.template, error.params) == (
        "{cache} needs at least one strategy, e.g. off,dynamic,static",
        ("cache",),
    )
    error = field_refusal("cache", "off")
    assert error.params == ("cache",)
    assert str(error) == "cache off alone compares nothing: add a strategy to set against it, e.g. off,dynamic"


def test_a_frontier_is_predicted_or_checked() -> None:
    assert check_field("frontier", None) is None
    assert check_field("frontier", "predict") == "predict" and check_field("frontier", "check") == "check"
    error = field_refusal("frontier", "guess")
    assert (error.template, error.params) == ("{frontier} is predict or check (or None), got 'guess'", ("frontier",))


def test_a_text_to_judge_along_has_words_in_it() -> None:
    assert check_field("quality_text", None) is None
    assert check_field("quality_text", "Once upon") == "Once upon"
    for bad in ("", "  \n", 5):
        error = field_refusal("quality_text", bad)
        assert (error.template, error.params) == (
            f"{{quality_text}} must be a text to judge quality along, got {bad!r}",
            ("quality_text",),
        )


def test_a_prefix_is_a_count_of_tokens_or_marked() -> None:
    assert check_field("prefix", None) is None and check_field("prefix", 1) == 1
    assert check_field("prefix", "MARKED") == MARKED
    for bad in (0, -2, True, "half", 1.5):
        error = field_refusal("prefix", bad)
        assert (error.template, error.params) == (
            f"{{prefix}} must be a number of tokens >= 1 or 'marked', got {bad!r}",
            ("prefix",),
        )


def test_kv_bits_are_left_open_or_a_count_from_one() -> None:
    assert check_field("kv_bits", None) is None and check_field("kv_bits", 1) == 1
    error = field_refusal("kv_bits", 0)
    assert (str(error), error.params) == ("kv_bits must be a whole number >= 1, got 0", ("kv_bits",))


def test_threads_are_at_most_the_cores_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spec_module.os, "cpu_count", lambda: 4)
    assert check_field("threads", None) is None
    assert check_field("threads", 4) == 4 and check_field("threads", 1) == 1
    error = field_refusal("threads", 5)
    assert (str(error), error.params) == ("threads 5 is more than the 4 cores here: use at most 4", ("threads",))
    assert str(field_refusal("threads", 0)) == "threads must be a whole number >= 1, got 0"
    monkeypatch.setattr(spec_module.os, "cpu_count", lambda: None)  # unknown: one core
    assert check_field("threads", 1) == 1
    assert str(field_refusal("threads", 2)) == "threads 2 is more than the 1 cores here: use at most 1"


def test_the_constructor_keeps_each_field_as_its_check_returns_it() -> None:
    spec = BenchSpec(new_tokens=[8, 8, 16], repeat=" Auto", max_seconds=3, cache=None)
    assert (spec.new_tokens, spec.repeat, spec.max_seconds) == ((8, 16), "auto", 3.0)
    assert type(spec.max_seconds) is float
    assert str(refusal(batch=0)) == "batch must be a whole number >= 1, got 0"


# ---- what it says of itself ----------------------------------------------------------------------------------------


def test_rounds_count_the_timed_ones_the_hooked_one_and_the_judged_one() -> None:
    assert BenchSpec(repeat=3).rounds == 3
    assert BenchSpec(repeat=3, steps=True).rounds == 4
    assert BenchSpec(repeat=3, cache="off,dynamic").rounds == 4
    assert BenchSpec(repeat=3, cache="off,dynamic", quality=False).rounds == 3
    assert BenchSpec(repeat=2, cache="off,dynamic", steps=True).rounds == 4
    assert BenchSpec(repeat="auto").rounds == first_stop()
    assert BenchSpec(repeat="auto", steps=True).rounds == first_stop() + 1


def test_plain_means_neither_a_comparison_nor_a_reused_prefix() -> None:
    assert BenchSpec().plain
    assert not BenchSpec(cache="off,dynamic").plain
    assert not BenchSpec.of(prefix=4).plain
    assert not BenchSpec().judged and not BenchSpec.of(prefix=4).judged
    assert BenchSpec(cache="off,dynamic").judged
    assert not BenchSpec(cache="off,dynamic", quality=False).judged


def test_the_record_holds_what_a_comparison_with_a_baseline_reads() -> None:
    assert BenchSpec(warmup_tokens=2, repeat=3).recorded() == {
        "chat": False,
        "warmup_tokens": 2,
        "repeat": 3,
        "steps": False,
    }
    assert BenchSpec(repeat="auto", ci_target=0.1, auto_cap=30, chat=True, steps=True).recorded() == {
        "chat": True,
        "warmup_tokens": 4,
        "repeat": "auto",
        "steps": True,
        "ci_target": 0.1,
        "auto_cap": 30.0,
    }
    assert BenchSpec.of(predict=True, max_seconds=20).recorded()["max_seconds"] == 20.0
    assert "max_seconds" not in BenchSpec(max_seconds=20).recorded()
    compared = BenchSpec(cache="off,quantized:hqq", kv_bits=4).recorded()
    assert (compared["kv_bits"], compared["quality"]) == (4, "greedy")
    assert BenchSpec(cache="off,dynamic").recorded()["kv_bits"] is None
    assert BenchSpec(cache="off,dynamic", quality=False).recorded()["quality"] == "off"
    assert BenchSpec(cache="off,dynamic", quality_text="Once").recorded()["quality"] == "text"
    assert BenchSpec.of(prefix=6).recorded()["prefix"] == 6
    assert BenchSpec.of(prefix=MARKED).recorded()["prefix"] == MARKED
    plain = BenchSpec().recorded()
    assert not {"kv_bits", "quality", "prefix", "ci_target", "auto_cap", "max_seconds"} & set(plain)


def test_written_back_it_is_plain_data_and_read_back_it_is_the_same_request() -> None:
    spec = BenchSpec(new_tokens="8,16", batch=2, cache="off,quantized:hqq", kv_bits=4, quality_text="Once")
    data = spec.to_dict()
    assert data["new_tokens"] == [8, 16] and data["batch"] == [2]
    assert data["cache"] == ["off", "quantized:hqq"] and data["prompt_tokens"] is None
    assert data["kv_bits"] == 4 and data["quality_text"] == "Once" and data["repeat"] == 1
    assert set(data) == set(FIELDS.split(", "))
    assert BenchSpec.from_dict(data) == spec
    assert BenchSpec().to_dict()["cache"] is None
    assert BenchSpec.from_dict({**BenchSpec(chat=True).to_dict(), "written_by": "a later version"}).chat
