"""The widget state a notebook would hold, rebuilt from the kernel's comm messages: are the progress bars done?

tqdm.notebook draws a bar as an HBox (description, FloatProgress, counter). When it closes, the bar is
finished if its style became 'success' or the HBox was closed or hidden (``leave=False``); a bar closed
before reaching its total turns 'danger' (red) and stays on the page.
"""

from __future__ import annotations

import datetime
import html
from typing import Any

__all__ = ["Widgets"]

_PREFIX = "IPY_MODEL_"


class Widgets:
    """Every widget model the kernel opened, with its state as the front end would hold it."""

    def __init__(self) -> None:
        self.state: dict[str, dict[str, Any]] = {}
        self.closed: set[str] = set()
        self.born: dict[str, int] = {}  # model id -> the cell (index) that opened it
        # model id -> when the kernel sent its opening, each change of its value, its last message (its own
        # clock, so the time a message waited to be read here does not count)
        self.opened: dict[str, float] = {}
        self.changed: dict[str, list[float]] = {}
        self.last: dict[str, float] = {}

    def hear(self, message: dict[str, Any], cell: int) -> None:
        """Apply one iopub message (anything but comm messages is ignored)."""
        kind, content = message["msg_type"], message["content"]
        model, sent = content.get("comm_id", ""), _sent(message)
        if kind == "comm_open":
            self.state[model] = dict(content.get("data", {}).get("state", {}))
            self.born[model], self.opened[model], self.last[model] = cell, sent, sent
        elif kind == "comm_msg" and content.get("data", {}).get("method") in ("update", "echo_update"):
            update = content["data"].get("state", {})
            if "value" in update and update["value"] != self.state.setdefault(model, {}).get("value"):
                self.changed.setdefault(model, []).append(sent)
            self.state[model].update(update)
            self.last[model] = sent
        elif kind == "comm_close":
            self.closed.add(model)

    def _gone(self, model: str) -> bool:
        """Closed, or hidden by its layout: no longer on the page."""
        layout = str(self.state.get(model, {}).get("layout", ""))
        hidden = self.state.get(layout.removeprefix(_PREFIX), {}).get("visibility") == "hidden"
        return model in self.closed or hidden

    def _containers(self, model: str) -> list[str]:
        link = _PREFIX + model
        return [m for m, state in self.state.items() if link in (state.get("children") or [])]

    def bars(self) -> dict[str, str]:
        """Each progress bar still on the page and not finished: model id -> its style."""
        found = {}
        for model, state in self.state.items():
            if not _progress(state):
                continue
            if state.get("bar_style") == "success" or self._gone(model):
                continue
            if any(self._gone(box) for box in self._containers(model)):
                continue
            found[model] = str(state.get("bar_style", ""))
        return found

    def progress(self, cell: int) -> list[str]:
        """The progress bars ``cell`` opened: the model ids, in the order they opened."""
        return [m for m, c in self.born.items() if c == cell and _progress(self.state.get(m, {}))]

    def still_s(self, bar: str) -> float:
        """How long ``bar`` held still after it opened: until what its row shows first changed (its value, or a
        text beside it: the clock, the time left), or for its whole life if nothing did."""
        row = [
            bar,
            *(
                child.removeprefix(_PREFIX)
                for box in self._containers(bar)
                for child in self.state[box].get("children") or []
            ),
        ]
        changes = [at for model in row for at in self.changed.get(model, []) if at > self.opened[bar]]
        return min(changes, default=self.last[bar]) - self.opened[bar]

    def full(self, bar: str) -> bool:
        state = self.state[bar]
        return bool(state.get("max")) and state.get("value") == state.get("max")

    def text(self, bar: str) -> str:
        """What the bar's row reads: its style, its value of its max, and the texts beside it."""
        state = self.state[bar]
        parts = [f"bar_style={state.get('bar_style')!r} value {state.get('value')} of {state.get('max')}:"]
        for box in self._containers(bar):
            for child in self.state[box].get("children") or []:
                value = self.state.get(child.removeprefix(_PREFIX), {}).get("value")
                if isinstance(value, str) and value:
                    parts.append(html.unescape(value).replace("\u2007", " "))
        return " ".join(parts)


def _progress(state: dict[str, Any]) -> bool:
    return str(state.get("_model_name", "")).endswith("ProgressModel")


def _sent(message: dict[str, Any]) -> float:
    """When the kernel sent ``message``, in seconds (jupyter_client hands the header's date parsed, or as text)."""
    date = message.get("header", {}).get("date")
    if isinstance(date, str):
        date = datetime.datetime.fromisoformat(date.replace("Z", "+00:00"))
    return date.timestamp() if isinstance(date, datetime.datetime) else 0.0
