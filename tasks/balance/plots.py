"""PNG figures of a release's statistics (after ReasonVQA's supplementary figures 3 and 4).

Rendered with matplotlib's Agg canvas (no pyplot, no global backend switch) under fixed
rc settings (matplotlib defaults + DejaVu Sans at fixed sizes) and saved without the
"Software" metadata, so the same stats give byte-identical PNGs. matplotlib is imported when
the first figure is rendered (about 0.25 s), so a caller rendering on a thread beside other
work (``stats.start_stats``) pays it there.

A figure is a pure function of what it draws (about 2 CPU s for the five, mostly text layout): a process keeps
the PNG bytes of the last ``KEPT_FIGURES`` it drew by a digest of their inputs, and a later build with the same
statistics (a rebuild in a long-running ``serve`` or Dask worker, a re-split that keeps the counts) writes them again
instead of drawing.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import threading
import warnings
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from matplotlib.typing import RcKeyType

RC: dict[RcKeyType, Any] = {
    "font.family": "DejaVu Sans",
    "font.size": 7,
    "axes.titlesize": 8,
    "axes.labelsize": 7,
    "legend.fontsize": 7,
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "svg.hashsalt": "reasonvqa",
}
COLORS = ("#4C72B0", "#DD8452")
LABEL_CHARS = 28
FIGURES = {  # file name -> size (inches)
    "answers_before_after.png": (12, 7),
    "answers_train_test.png": (12, 7),
    "entropy_before_after.png": (5, 5),
    "divergence_train_test.png": (7, 7),
    "counts_by_split.png": (12, 8),
}


def write_plots(stats: dict, largest_groups: list[str], out_dir: Path) -> dict[str, Path]:
    """Render every figure of ``stats`` into ``out_dir``; return {file name: path}."""
    top, entropy, divergence, counts = (stats["top_answers"], stats["entropy_bits"], stats["train_test_divergence"],
                                        stats["counts"])
    figures = {  # file name -> (what it is drawn from, how)
        "answers_before_after.png": (top, lambda fig: _top_answers(fig, top, "before_order", ("pool", "balanced"), False)),
        "answers_train_test.png": (top, lambda fig: _top_answers(fig, top, "after_order", ("train", "test"), True)),
        "entropy_before_after.png": (entropy, lambda fig: _entropy(fig, entropy)),
        "divergence_train_test.png": ([divergence, largest_groups], lambda fig: _divergence(fig, divergence, largest_groups)),
        "counts_by_split.png": (counts, lambda fig: _counts(fig, counts)),
    }
    out = {}
    for name, (inputs, draw) in figures.items():
        out[name] = out_dir / name
        key = _figure_key(name, inputs)
        with _RENDERING:
            png = _DRAWN.get(key)
            if png is None:
                png = _DRAWN[key] = render_png(draw, FIGURES[name])
                while len(_DRAWN) > KEPT_FIGURES:
                    _DRAWN.popitem(last=False)
            _DRAWN.move_to_end(key)
        out[name].parent.mkdir(parents=True, exist_ok=True)
        out[name].write_bytes(png)
    return out


KEPT_FIGURES = 20  # about 100 KB each
_DRAWN: OrderedDict[str, bytes] = OrderedDict()  # digest of a figure's inputs -> its PNG bytes, oldest first
_RENDERING = threading.RLock()  # rcParams and the warnings filters are process-wide: one figure at a time


def _figure_key(name: str, inputs: object) -> str:
    """A digest of everything the figure ``name`` is drawn from (the drawing code is the process's own)."""
    text = json.dumps([name, FIGURES[name], RC, inputs], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def render_png(draw, size: tuple[float, float]) -> bytes:
    """Draw on a fresh figure under the fixed rc settings; its deterministic PNG bytes."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    buffer = io.BytesIO()
    with _RENDERING, matplotlib.rc_context():
        matplotlib.rcdefaults()
        matplotlib.rcParams.update(RC)
        fig = Figure(figsize=size)
        FigureCanvasAgg(fig)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Glyph .* missing from font")
            draw(fig)
            fig.tight_layout()
            # zlib level 1: PNG encoding was a third of the rendering time at the default level 6
            fig.savefig(buffer, format="png", metadata={"Software": None}, pil_kwargs={"compress_level": 1})
    return buffer.getvalue()


def _short(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "\u2026"


def _empty(fig: Figure, message: str) -> None:
    ax = fig.add_subplot(1, 1, 1)
    ax.axis("off")
    ax.text(0.5, 0.5, message, ha="center", va="center")


def _top_answers(fig: Figure, top: dict, order: str, tables: tuple[str, str], as_share: bool) -> None:
    if not top:
        _empty(fig, "no property group")
        return
    cols = min(3, len(top))
    rows = math.ceil(len(top) / cols)
    for i, (group, data) in enumerate(top.items()):
        ax = fig.add_subplot(rows, cols, i + 1)
        entries = data[order]
        y = list(range(len(entries)))
        for j, table in enumerate(tables):
            total = data["questions"][table] or 1
            values = [e[table] / total * 100 if as_share else e[table] for e in entries]
            ax.barh([v + (j - 0.5) * 0.4 for v in y], values, height=0.4, color=COLORS[j], label=table)
        ax.set_yticks(y)
        ax.set_yticklabels([_short(e["answer"]) for e in entries])
        ax.invert_yaxis()
        counts = ", ".join(f"{t} {data['questions'][t]}" for t in tables)
        ax.set_title(f"{group} ({counts})")
        ax.set_xlabel("% of the group's questions" if as_share else "questions")
        if i == 0:
            ax.legend(loc="best")


def _entropy(fig: Figure, entropy: dict) -> None:
    if not entropy:
        _empty(fig, "no property group")
        return
    ax = fig.add_subplot(1, 1, 1)
    before = [v["before"] for v in entropy.values()]
    after = [v["after"] for v in entropy.values()]
    top = max(before + after + [1.0])
    ax.plot([0, top], [0, top], color="#999999", linewidth=0.8)
    ax.scatter(before, after, s=12, color=COLORS[0])
    ax.set_xlabel("answer entropy before balancing (bits)")
    ax.set_ylabel("answer entropy after balancing (bits)")
    ax.set_title(f"Answer entropy per property group ({len(entropy)} groups)")


def _divergence(fig: Figure, div: dict, largest: list[str]) -> None:
    groups = [g for g in largest if div["per_group"].get(g) is not None][:30]
    if not groups:
        _empty(fig, "no group present in both train and test")
        return
    ax = fig.add_subplot(1, 1, 1)
    values = [div["per_group"][g] for g in groups]
    ax.barh(range(len(groups)), values, color=COLORS[0])
    ax.set_yticks(range(len(groups)))
    ax.set_yticklabels(groups)
    ax.invert_yaxis()
    if div["overall"] is not None:
        ax.axvline(div["overall"], color=COLORS[1], linestyle="--", label=f"all answers: {div['overall']:.4f}")
        ax.legend(loc="lower right")
    ax.set_xlabel("Jensen-Shannon divergence, train vs test answers (bits)")
    ax.set_title("Train/test answer divergence of the largest property groups")


def _counts(fig: Figure, counts: dict) -> None:
    keys = [k for k in ("by_source", "by_hop", "by_domain", "by_answer_category") if k in counts.get("train", {})]
    if not keys:
        _empty(fig, "no breakdown columns")
        return
    for i, key in enumerate(keys):
        ax = fig.add_subplot(2, 2, i + 1)
        labels = sorted(set(counts["train"].get(key, {})) | set(counts["test"].get(key, {})))
        y = list(range(len(labels)))
        for j, table in enumerate(("train", "test")):
            values = [counts[table].get(key, {}).get(label, 0) for label in labels]
            ax.barh([v + (j - 0.5) * 0.4 for v in y], values, height=0.4, color=COLORS[j], label=table)
        ax.set_yticks(y)
        ax.set_yticklabels([_short(label) for label in labels])
        ax.invert_yaxis()
        ax.set_title(f"questions {key.replace('_', ' ')}")
        if i == 0:
            ax.legend(loc="best")
