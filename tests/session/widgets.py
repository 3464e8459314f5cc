"""The widget state a notebook would hold, rebuilt from the kernel's comm messages: are the progress bars done?

tqdm.notebook draws a bar as an HBox (description, FloatProgress, counter). When it closes, the bar is
finished if its style became 'success' or the HBox was closed or hidden (``leave=False``); a bar closed
before reaching its total turns 'danger' (red) and stays on the page.
"""

from __future__ import annotations

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

    def hear(self, message: dict[str, Any], cell: int) -> None:
        """Apply one iopub message (anything but comm messages is ignored)."""
        kind, content = message["msg_type"], message["content"]
        if kind == "comm_open":
            self.state[content["comm_id"]] = dict(content.get("data", {}).get("state", {}))
            self.born[content["comm_id"]] = cell
        elif kind == "comm_msg" and content.get("data", {}).get("method") in ("update", "echo_update"):
            self.state.setdefault(content["comm_id"], {}).update(content["data"].get("state", {}))
        elif kind == "comm_close":
            self.closed.add(content["comm_id"])

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
            if not str(state.get("_model_name", "")).endswith("ProgressModel"):
                continue
            if state.get("bar_style") == "success" or self._gone(model):
                continue
            if any(self._gone(box) for box in self._containers(model)):
                continue
            found[model] = str(state.get("bar_style", ""))
        return found

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
