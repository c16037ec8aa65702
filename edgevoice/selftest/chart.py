"""The waterfall chart of a self-test: one row per turn, its stages laid end to end from the end of the visitor's
speech to the first reply sample played, the speaker-side measurement and the budget marked. PNG, via matplotlib's
Agg backend (no display needed)."""

from __future__ import annotations

from pathlib import Path

from edgevoice.selftest.session import SessionResult
from edgevoice.trace import STAGE_NAMES

COLORS = ("#4c72b0", "#8172b3", "#55a868", "#c44e52", "#dd8452", "#937860", "#da8bc3", "#8c8c8c")


def waterfall(result: SessionResult, path: Path | str, *, budget_ms: float) -> Path:
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib import pyplot as plt

    turns = result.turns
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.45 * max(1, len(turns))), dpi=110)
    try:
        labels = []
        for row, turn in enumerate(turns):
            stages = turn.get("stages_ms") or {}
            assert isinstance(stages, dict)
            left = 0.0
            for stage, color in zip(STAGE_NAMES, COLORS, strict=True):
                width = float(stages.get(stage, 0.0))
                ax.barh(
                    row, width, left=left, color=color, edgecolor="white", height=0.6, label=stage if row == 0 else None
                )
                left += width
            measured = result.speaker_side_s[row] if row < len(result.speaker_side_s) else None
            if measured is not None:
                ax.plot(
                    measured * 1000,
                    row,
                    marker="|",
                    markersize=16,
                    color="black",
                    label="speaker side" if row == 0 else None,
                )
            labels.append(f"{row + 1}: {str(turn.get('transcript') or '')[:28]}")
        ax.axvline(budget_ms, color="#c44e52", linestyle="--", linewidth=1, label=f"budget {budget_ms:.0f} ms")
        ax.set_yticks(range(len(turns)), labels=labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("ms after the end of the visitor's speech")
        ax.set_title("edgevoice selftest: voice-to-voice by stage")
        ax.legend(
            fontsize=7,
            ncol=5,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.35 if len(turns) < 4 else -0.12),
            frameon=False,
        )
        fig.tight_layout()
        out = Path(path)
        fig.savefig(out, format="png")
    finally:
        plt.close(fig)
    return out
