"""The benchmark scripts run in quick mode and report what they measured (no timing asserts)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_oracle_benchmark_quick(tmp_path, capsys):
    out = tmp_path / "oracle.json"
    result = _load("bench_oracle").main(["--quick", "--json", str(out)])
    assert json.loads(out.read_text())["m"] == result["m"] == 2000
    assert result["max_bracket"] <= 1e-9
    assert result["ratio"] > 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("ratio ")


def test_private_fit_benchmark_quick(tmp_path, capsys):
    out = tmp_path / "fit.json"
    result = _load("bench_private_fit").main(["--quick", "--json", str(out)])
    assert [r["n"] for r in result["rows"]] == [2000, 8000]
    assert all(r["epsilon_spent"] <= 1.0 + 1e-12 for r in result["rows"])
    assert "growth_exponent" in json.loads(out.read_text())
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("ratio ")


def test_audit_benchmark_quick(tmp_path):
    out = tmp_path / "audit.json"
    result = _load("bench_audit").main(["--quick", "--json", str(out)])
    assert result["all_sound_within_claim"] and result["broken_mechanism_detected"]
    assert json.loads(out.read_text())["rows"]
