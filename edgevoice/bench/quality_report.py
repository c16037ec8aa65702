"""The quality benchmark's report as text tables."""

from __future__ import annotations

from typing import Any

__all__ = ["TARGETS", "format_quality", "format_venues"]

TARGETS = {"wer_10db": 10.0, "right_fact": 90.0, "dont_know": 90.0, "round_trip_wer": 5.0}


def _f(value: float | None, unit: str = " %") -> str:
    return "-" if value is None else f"{value:.1f}{unit}"


def format_quality(report: dict[str, Any]) -> str:
    q = report["questions"]
    conditions: list[str] = report["conditions"]
    lines = [
        f"Quality on the sample venue: {q['in_knowledge']} questions in the knowledge, {q['out_of_knowledge']} "
        f"outside it; voices {', '.join(report['voices'])}; {', '.join(conditions)} "
        f"(pink noise; measured SNR {report['snr_measured_db']}).",
        f"Recognizer prompt: {report['asr_prompt']!r}. Grounding gate threshold {report['gate']['threshold']}"
        f"{', retrieval mode' if report['gate']['retrieval'] else ''}"
        f", semantic matching {'on' if report['gate'].get('semantic') else 'off'}.",
        "",
        "Recognition (word error rate)",
        f"  {'model':<28} {'prompt':<7} " + " ".join(f"{c:>8}" for c in conditions) + "  names ok  no speech  ms/utt",
    ]
    for row in report["recognition"]:
        wer = " ".join(f"{_f(row['wer_percent'][c], '%'):>8}" for c in conditions)
        lines.append(
            f"  {row['model']:<28} {row['prompt']:<7} {wer}  {_f(row['names_right_percent'], '%'):>8}"
            f"  {row['no_speech_found']:>9}  {row['ms_per_utterance']:>6.0f}"
        )
    lines += [
        "",
        "Answers (right fact: questions in the knowledge; don't know: questions outside it; direct: questions in the"
        " knowledge answered with an entry's own answer, without the model)",
        f"  {'model':<28} {'input':<7} {'right fact':>10} {'dont know':>10} {'false dk':>9} {'gated out':>10}"
        f" {'replaced':>9} {'direct':>8}",
    ]
    for row in report["answers"]:
        for kind, m in row["by_input"].items():
            lines.append(
                f"  {row['model']:<28} {kind:<7} {_f(m['right_fact_percent']):>10} {_f(m['dont_know_percent']):>10}"
                f" {_f(m['false_dont_know_percent']):>9} {_f(m['gated_out_of_knowledge_percent']):>10}"
                f" {_f(m['replaced_percent']):>9} {_f(m.get('direct_percent')):>8}"
            )
        s = row["spoken"]
        lines.append(
            f"  {row['model']:<28} {'spoken':<7} {_f(s['right_fact_percent']):>10} {_f(s['dont_know_percent']):>10}"
            f"   replies: {row['reply_words_mean']} words, {row['reply_sentences_mean']} sentences (max "
            f"{row['reply_sentences_max']}), {row['replies_with_markup']} with markup, "
            f"{row['seconds_per_generated_reply']} s per generated reply"
        )
    lines += ["", "Synthesizer round trip (each distinct reply spoken by the kiosk's voice, recognized again)"]
    for row in report["round_trip"]:
        lines.append(
            f"  {row['recognizer']:<28} {row['replies']:>4} replies x {row.get('draws', 1)} renderings  "
            f"WER {_f(row['wer_percent'], '%')}" + _spread(row.get("draw_wer_percent", []))
        )
    if "phantoms" in report:
        lines += ["", "Phantoms (clips without speech straight into the recognizer, venue prompt on)"]
        for row in report["phantoms"]:
            texts = "; ".join(f"{clip}: {text!r}" for clip, text in row["with_text"].items()) or "none"
            lines.append(f"  {row['model']:<28} {row['setup']:<11} {len(row['with_text'])}/{row['clips']}  {texts}")
    lines += ["", *targets(report), f"({report['seconds']:.0f} s)"]
    return "\n".join(lines)


def targets(report: dict[str, Any]) -> list[str]:
    """One line per target, judged on the configured (first) models."""
    out = ["Targets (configured models):"]
    rec = next((r for r in report["recognition"]), None)
    worst = report["conditions"][-1]
    if rec is not None:
        wer = rec["wer_percent"][worst]
        out.append(f"  WER at {worst} <= {TARGETS['wer_10db']:.0f} %: {_f(wer)} {_met(wer <= TARGETS['wer_10db'])}")
    if report["answers"]:
        spoken = report["answers"][0]["spoken"]
        for key, label in (("right_fact", "right facts"), ("dont_know", "honest don't know")):
            value = spoken[f"{key}_percent"]
            ok = value is not None and value >= TARGETS[key]
            out.append(f"  {label} >= {TARGETS[key]:.0f} % (spoken questions): {_f(value)} {_met(ok)}")
    if report["round_trip"]:
        rt = report["round_trip"][0]["wer_percent"]
        out.append(
            f"  round-trip WER <= {TARGETS['round_trip_wer']:.0f} %: {_f(rt)} {_met(rt <= TARGETS['round_trip_wer'])}"
        )
    return out


def _met(ok: bool) -> str:
    return "met" if ok else "NOT MET"


def _spread(per_draw: list[float]) -> str:
    """The range over single renderings, so a reader sees how far one rendering is from the mean."""
    if len(per_draw) < 2:
        return ""
    return f" (one rendering each: {min(per_draw):.1f} to {max(per_draw):.1f} %)"


def format_venues(report: dict[str, Any]) -> str:
    """The venue benchmark's table: one row per venue, split and input (written; spoken per condition, all
    voices together and then each voice)."""
    spoken = f"; spoken by {', '.join(report['voices'])}, {', '.join(report['conditions'])}" if report["voices"] else ""
    lines = [
        f"Answers per venue (models {report['models']['asr']}, {report['models']['llm']}{spoken}).",
        "right facts: fact, paraphrase, neighbour, number, follow_up; don't know: out, near_miss; small talk: a short"
        " reply that is no refusal; invented: replies with a number, time or price the knowledge never states;"
        " asked again: questions heard unsure that the visitor was asked to say again (honest, but no answer);"
        " wrong entry: an entry read out (directly or instead of an echo) that is not the question's; wrong subj:"
        " replies with a value the knowledge gives only for another entry; near miss: the refusal with what the"
        " nearest entry says (docs/measuring.md).",
        f"  {'venue':<10} {'split':<5} {'input':<15} {'voice':<16} {'right facts':>11} {'dont know':>10}"
        f" {'small talk':>10} {'invented':>8} {'asked again':>11} {'wrong entry':>11} {'wrong subj':>10}"
        f" {'near miss':>9} {'n':>5}",
    ]
    for row in report["rows"]:
        lines.append(
            f"  {row['venue']:<10} {row['split']:<5} {row['input']:<15} {row.get('voice', '-'):<16}"
            f" {_f(row['right_facts_percent']):>11}"
            f" {_f(row['dont_know_percent']):>10} {_f(row['small_talk_percent']):>10} {row['invented']:>8}"
            f" {row.get('asked_again', 0):>11} {row.get('wrong_entry', 0):>11} {row.get('wrong_subject', 0):>10}"
            f" {row.get('told_near_miss', 0):>9} {row['n']:>5}"
        )
    lines.append(f"({report['seconds']:.0f} s)")
    return "\n".join(lines)
