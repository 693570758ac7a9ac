"""The latency time line of bench/steps.py: marks from event stamps, phases, medians."""

from __future__ import annotations

import math

import pytest

from bench.timeline import Marks, figure_lines, marks_from_stamps, medians, phases

T = 1_700_000_000.0  # an epoch second; stamps below are offsets from it in ms
MS = 1e-3  # tolerance in ms: a double holds epoch seconds to about 0.4 microseconds


def at(ms: float) -> float:
    return T + ms / 1000


def events(*rows: tuple[str, str | None, float]) -> list[tuple[str, str | None, float]]:
    return [(kind, step, at(ms)) for kind, step, ms in rows]


MANUAL_RUN = events(
    ("run.created", None, 0.85),
    ("step.succeeded", "start", 0.86),  # the trigger: never claimed
    ("step.ready", "t0", 0.87),
    ("step.started", "t0", 5.9),
    ("step.succeeded", "t0", 7.8),
    ("step.ready", "t1", 7.8),
    ("step.started", "t1", 7.81),
    ("step.succeeded", "t1", 9.8),
    ("step.started", "t2", 9.81),
    ("step.succeeded", "t2", 11.4),
    ("run.succeeded", None, 11.45),
)


def approx(values: dict[str, float]) -> dict[str, object]:
    return {k: pytest.approx(v, abs=MS) for k, v in values.items()}


def test_marks_take_claimed_steps_and_the_end_event() -> None:
    marks = marks_from_stamps(T, MANUAL_RUN, at(99.0), returned=at(2.7))
    assert marks is not None
    assert marks.inserted == at(0.85)
    assert marks.claimed == at(5.9)
    assert [sid for sid, _ in marks.steps] == ["t0", "t1", "t2"]
    assert marks.ended == at(11.45)  # the event, not the runs row's finished_at


def test_phases_of_one_in_process_run() -> None:
    marks = marks_from_stamps(T, MANUAL_RUN, None, returned=at(2.7))
    assert marks is not None
    spans, since = phases(marks)
    assert list(spans) == [
        "insert_statement",
        "start_returned",
        "queue_hop",
        "step.t0",
        "step.t1",
        "step.t2",
        "run_end",
        "total",
    ]
    assert spans == approx(
        {
            "insert_statement": 0.85,
            "start_returned": 1.85,
            "queue_hop": 3.2,
            "step.t0": 1.9,
            "step.t1": 2.0,
            "step.t2": 1.6,
            "run_end": 0.05,
            "total": 11.45,
        }
    )
    assert since["claimed"] == pytest.approx(5.9, abs=MS)
    assert since["done.t2"] == pytest.approx(11.4, abs=MS)
    # the phases add up to the total
    assert sum(v for k, v in spans.items() if k != "total") == pytest.approx(spans["total"], abs=MS)


def test_webhook_run_measures_the_queue_hop_from_the_insert_and_the_answer() -> None:
    marks = marks_from_stamps(T, MANUAL_RUN, None, answered=at(15.0))
    assert marks is not None
    spans, since = phases(marks)
    assert "start_returned" not in spans and "returned" not in since
    assert spans["queue_hop"] == pytest.approx(5.9 - 0.85, abs=MS)
    assert spans["answer"] == pytest.approx(15.0 - 11.45, abs=MS)
    assert spans["total"] == pytest.approx(15.0, abs=MS)
    assert since["answered"] == pytest.approx(15.0, abs=MS)


def test_the_runs_row_ends_a_run_without_an_end_event() -> None:
    without_end = MANUAL_RUN[:-1]
    marks = marks_from_stamps(T, without_end, at(12.0))
    assert marks is not None and marks.ended == at(12.0)


@pytest.mark.parametrize(
    ("stamps", "finished"),
    [
        ([], at(1.0)),  # no events
        (MANUAL_RUN[:3], at(1.0)),  # never claimed
        (MANUAL_RUN[:4], math.nan),  # claimed, nothing completed
        (MANUAL_RUN[:-1], None),  # still running
    ],
)
def test_incomplete_runs_give_no_marks(
    stamps: list[tuple[str, str | None, float]], finished: float | None
) -> None:
    assert marks_from_stamps(T, stamps, finished) is None


def test_a_timeline_needs_a_step() -> None:
    with pytest.raises(ValueError, match="at least one completed step"):
        phases(Marks(sent=T, inserted=T, claimed=T, steps=(), ended=T))


def test_medians_per_phase_and_the_figure_names() -> None:
    runs = [
        Marks(
            sent=at(0),
            inserted=at(1),
            claimed=at(1 + hop),
            steps=(("a", at(2 + hop)),),
            ended=at(2 + hop),
        )
        for hop in (3.0, 1.0, 2.0)
    ]
    found = medians(runs)
    assert found.runs == 3
    assert found.phases == approx(
        {"insert_statement": 1.0, "queue_hop": 2.0, "step.a": 1.0, "run_end": 0.0, "total": 4.0}
    )
    assert found.at["claimed"] == pytest.approx(3.0, abs=MS)
    names = [name for name, _ in figure_lines("timeline", found)]
    assert names[:2] == ["timeline.insert_statement", "timeline.queue_hop"]
    assert "timeline.at.done.a" in names
    assert medians([]).runs == 0 and medians([]).phases == {}
