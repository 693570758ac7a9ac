"""The side-by-side harness's pure parts (bench/peers/): figures over rounds, statistics,
the interleaving order and the peers' scenario definitions. No peer is installed or run."""

from __future__ import annotations

import itertools
import math

import pytest

from bench.peers.engines import node_red_fire_and_forget, node_red_flow
from bench.peers.profile import package, parse_frame, report, summarise
from bench.peers.run import arguments, rotated
from bench.peers.stats import (
    Rounds,
    ceiling_share,
    ff_rates,
    ff_table,
    figure_line,
    goal_table,
    intake_table,
    latency_figures,
    markdown_table,
    number,
    per_run,
    spread,
    write_transactions,
)


def test_spread_is_min_median_max_and_skips_nan() -> None:
    assert spread([3.0, 1.0, 2.0]) == (1.0, 2.0, 3.0)
    assert spread([4.0, math.nan, 1.0]) == (1.0, 2.5, 4.0)
    assert all(math.isnan(v) for v in spread([]))
    assert all(math.isnan(v) for v in spread([math.nan]))


def test_figure_line_format() -> None:
    line = figure_line("restate", "latency_median", [14.04, 13.5, 15.25], "ms")
    assert line == "figure: restate.latency_median = 13.5/14.04/15.25 ms"
    assert figure_line("dbos", "errors", [], "requests") == (
        "figure: dbos.errors = nan/nan/nan requests"
    )
    assert number(3049.27) == "3049"
    assert number(0.012345) == "0.01235"


def test_rounds_keep_order_and_units() -> None:
    out = Rounds()
    out.add("railyard", "runs_per_s_1000", 47.0, "runs/s")
    out.add("restate", "runs_per_s_1000", 303.0, "runs/s")
    out.add("railyard", "runs_per_s_1000", 45.0, "runs/s")
    out.add("railyard", "runs_per_s_1000", 50.0, "runs/s")
    assert out.lines() == [
        "figure: railyard.runs_per_s_1000 = 45/47/50 runs/s",
        "figure: restate.runs_per_s_1000 = 303/303/303 runs/s",
    ]
    assert out.median("railyard", "runs_per_s_1000") == 47.0
    assert math.isnan(out.median("n8n", "runs_per_s_1000"))


def test_latency_figures_nearest_rank_in_ms() -> None:
    seconds = [i / 1000 for i in range(1, 101)]  # 1..100 ms
    got = latency_figures(seconds)
    assert got["latency_median"] == 51.0  # nearest rank of 0.5 * 99 = 49.5 -> index 50
    assert got["latency_p95"] == 95.0
    assert got["latency_p99"] == 99.0
    assert math.isnan(latency_figures([])["latency_median"])


def test_per_run_and_write_transactions() -> None:
    assert per_run(2.3, 100, 1000) == 23.0
    assert math.isnan(per_run(1.0, 0))
    assert write_transactions(1000, 6001) == 5000  # the later reading took one id
    assert write_transactions(10, 10) == 0


def test_rotated_interleaves_rounds() -> None:
    engines = ["railyard", "dbos", "restate"]
    firsts = [rotated(engines, r)[0] for r in range(3)]
    assert firsts == engines
    assert sorted(rotated(engines, 4)) == sorted(engines)
    assert rotated([], 2) == []


def test_arguments_refuse_unknown_engines(capsys: pytest.CaptureFixture[str]) -> None:
    args = arguments(["--rounds", "1", "--runs", "5", "--engines", "restate,railyard"])
    assert (args.rounds, args.runs, args.engines) == (1, 5, "restate,railyard")
    with pytest.raises(SystemExit) as exit:
        arguments(["--engines", "restate,temporal"])
    assert exit.value.code == 2
    assert "unknown engines: temporal" in capsys.readouterr().err


def test_node_red_flow_is_webhook_set_if_answer() -> None:
    nodes = {n["id"]: n for n in node_red_flow()}
    assert [nodes[i]["type"] for i in ("hook", "set_1", "if_1", "answer")] == [
        "http in",
        "change",
        "switch",
        "http response",
    ]
    assert nodes["hook"]["wires"] == [["set_1"]]
    assert nodes["if_1"]["wires"] == [["answer"], ["answer"]]  # both branches answer


SITE = "/r/.venv/lib/python3.11/site-packages"
WORKER = f"run ({SITE}/arq/worker.py:300);advance (/r/backend/workers/worker.py:88)"
COLLAPSED = "\n".join(
    [
        f"{WORKER};execute ({SITE}/sqlalchemy/engine/base.py:1400) 60",
        f"{WORKER};plan (/r/backend/engine/planner.py:20) 30",
        "_run_once (/usr/lib/python3.11/asyncio/base_events.py:1900) 5",
        " 5",
        "not a stack line",
    ]
)


def test_profile_summary_shares() -> None:
    summary = summarise(COLLAPSED, top=5)
    assert summary.samples == 100
    assert dict(summary.by_package) == {
        "sqlalchemy": 0.6,
        "backend/engine": 0.3,
        "stdlib:asyncio": 0.05,
        "(no Python frame)": 0.05,
    }
    assert summary.by_leaf[0] == ("execute (sqlalchemy)", 0.6)
    inclusive = dict(summary.by_own_function)
    assert inclusive["backend/workers/worker.py:advance"] == 0.9  # on both stacks
    assert inclusive["backend/engine/planner.py:plan"] == 0.3
    lines = report("worker", summary)
    assert lines[0] == "# profile worker: 100 samples"
    assert "sqlalchemy 60%" in lines[1]
    assert summarise("").samples == 0


def test_profile_frames_and_packages() -> None:
    assert parse_frame("<module> (<string>:6)") == ("<module>", "<string>")
    assert parse_frame("weird frame") == ("weird frame", "")
    assert package("/v/lib/python3.11/site-packages/msgspec/__init__.py") == "msgspec"
    assert package("/usr/lib/python3.11/json/decoder.py") == "stdlib:json"
    assert package("/repo/connectors/builtin/data.py") == "connectors/builtin"
    assert package("/repo/backend/app.py") == "backend"
    assert package("asyncpg/connection.py") == "asyncpg"
    assert package("<string>") == "<string>"


def test_ceiling_share_and_markdown_table() -> None:
    assert ceiling_share(47, 5, 3049) == 47 * 5 / 3049 * 100
    assert math.isnan(ceiling_share(47, 5, math.nan))
    out = Rounds()
    for value in (40.0, 41.0, 39.0):
        out.add("railyard", "latency_median", value, "ms")
    out.add("railyard", "latency_p95", 50.0, "ms")
    out.add("railyard", "runs_per_s_1000", 47.0, "runs/s")
    out.add("railyard", "engine_cpu_per_run", 23.0, "ms")
    out.add("railyard", "pg_cpu_per_run", 9.0, "ms")
    out.add("railyard", "pg_write_xacts_per_run", 5.0, "")
    out.add("restate", "latency_median", 14.0, "ms")
    out.add("restate", "latency_p95", 22.0, "ms")
    out.add("restate", "runs_per_s_1000", 303.0, "runs/s")
    out.add("restate", "engine_cpu_per_run", 5.4, "ms")
    out.add("postgres", "pgbench_N_8_clients", 3049.0, "tps")
    assert out.last("railyard", "latency_median") == 39.0
    assert markdown_table(out, ["railyard", "restate"], 1000)[2:] == [
        "| railyard | 40 ms / 50 ms | 47 | 23 ms + 9 ms | 5 |",
        "| restate | 14 ms / 22 ms | 303 | 5.4 ms | (own log) |",
        "| PostgreSQL ceiling: pgbench -N, 8 clients | | 3049 tps | | |",
    ]


def test_ff_rates_count_from_the_load_start_to_the_last_end() -> None:
    rates = ff_rates(1000, 2.0, 990, 100.0, 104.0)
    assert rates == {"accepted_per_s": 500.0, "completed_per_s": 247.5, "not_completed": 10.0}
    none = ff_rates(5, 1.0, 0, 100.0, 0.0)
    assert math.isnan(none["completed_per_s"]) and none["not_completed"] == 5.0


def test_goal_table_compares_railyard_with_restate_on_medians() -> None:
    out = Rounds()
    for value in (300.0, 330.0, 320.0):
        out.add("railyard", "runs_per_s_1000", value, "runs/s")
    out.add("restate", "runs_per_s_1000", 250.0, "runs/s")
    out.add("railyard", "latency_median", 6.0, "ms")
    out.add("restate", "latency_median", 8.0, "ms")
    out.add("railyard", "ff_runs_per_s_1000", 330.0, "runs/s")
    out.add("restate", "ff_runs_per_s_1000", 480.0, "runs/s")
    lines = goal_table(out, 1000, 1000)
    rows = {line.split(" | ")[0].lstrip("| "): line for line in lines[2:]}
    assert rows["waiting: runs/s"].endswith("| 320 | 250 | 1.28x | >= 1.2x | yes |")
    assert rows["waiting: latency median"].endswith("| 6 | 8 | 0.75x | <= 0.8x | yes |")
    assert rows["fire-and-forget: completed runs/s"].endswith("| 0.688x | >= 1.2x | no |")
    assert rows["fire-and-forget: start answer median"].endswith(
        "| nan | nan | nanx | <= 0.8x | n/a |"
    )


def test_ff_table_has_a_row_per_engine() -> None:
    out = Rounds()
    out.add("restate", "ff_accepted_per_s_1000", 1593.0, "starts/s")
    out.add("restate", "ff_runs_per_s_1000", 483.0, "runs/s")
    lines = ff_table(out, ["railyard", "restate"], 1000)
    assert len(lines) == 4
    assert lines[3].startswith("| restate | 1593 | 483 | nan ms")


def test_intake_table_sets_the_frozen_intake_beside_both_engines_executing() -> None:
    out = Rounds()
    for value in (1700.0, 1800.0, 1900.0):
        out.add("railyard", "intake_accepted_per_s_1000", value, "starts/s")
    out.add("railyard", "intake_accept_median_1000", 17.0, "ms")
    out.add("railyard", "intake_cpu_per_start_api_1000", 0.5, "ms")
    out.add("railyard", "intake_cpu_per_start_postgres_1000", 0.25, "ms")
    out.add("railyard", "ff_accepted_per_s_1000", 600.0, "starts/s")
    out.add("restate", "ff_accepted_per_s_1000", 2000.0, "starts/s")
    out.add("restate", "ff_accept_median_1000", 13.5, "ms")
    lines = intake_table(out, 1000)
    assert len(lines) == 5
    assert lines[2] == (
        "| Railyard, workers frozen (intake alone) | 1800 | 0.9x | 17 ms | 0.5 ms + 0.25 ms |"
    )
    assert lines[3].startswith("| Railyard, executing | 600 | 0.3x | nan ms |")
    assert lines[4] == "| restate, executing | 2000 | 1x | 13.5 ms |  |"


def test_node_red_fire_and_forget_answers_at_once_and_counts_ends() -> None:
    nodes = {n["id"]: n for n in node_red_fire_and_forget()}
    assert nodes["ff_hook"]["url"] == "/ff"
    assert nodes["ff_hook"]["wires"] == [["ff_accept", "ff_s1"]]  # answer and steps at once
    assert nodes["ff_accept"]["wires"] == [["ff_answer"]]
    chain = ["ff_s1", "ff_s2", "ff_s3", "ff_count"]
    for here, there in itertools.pairwise(chain):
        assert nodes[here]["wires"] == [[there]]
    assert "flow.set('done'" in str(nodes["ff_count"]["func"])
    assert nodes["ff_done"]["method"] == "get"
    ids = [n["id"] for n in node_red_flow()]
    assert len(ids) == len(set(ids)) and "ff_hook" in ids


def test_arguments_refuse_unknown_shapes(capsys: pytest.CaptureFixture[str]) -> None:
    assert arguments(["--shapes", "ff"]).shapes == "ff"
    with pytest.raises(SystemExit):
        arguments(["--shapes", "waiting,burst"])
    assert "unknown shapes" in capsys.readouterr().err
