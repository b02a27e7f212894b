"""The main job: ``python -m cvxdp demo`` runs on built-in data and reports what it promises."""

from __future__ import annotations

import subprocess
import sys

from cvxdp.cli import main


def test_demo_small(capsys):
    assert main(["demo", "--n", "3000", "--d", "4", "--no-progress", "--noise-seed", "0"]) == 0
    out = capsys.readouterr().out
    for needle in ("private (ε-DP)", "non-private ERM", "privacy ledger: spent ε = 1 of 1",
                   "certificates of the private steps", "excess test loss",
                   "the non-private fit and the fit times are diagnostics, NOT private"):
        assert needle in out


def test_demo_options(capsys):
    assert main(["demo", "--dataset", "student-t-hinge", "--n", "2000", "--d", "3", "--epsilon", "0.5",
                 "--profile", "paper", "--no-progress"]) == 0
    assert "profile paper" in capsys.readouterr().out


def test_demo_takes_the_moment_bounds(capsys):
    """``--G-k auto`` reads a private tail histogram (its release in the ledger); ``--G-2`` is passed on
    as a public bound; a bound that is not positive is refused before any data are read."""
    assert main(["demo", "--n", "3000", "--d", "3", "--no-progress", "--noise-seed", "0", "--G-k", "auto",
                 "--no-diagnostics"]) == 0
    out = capsys.readouterr().out
    assert "G_k = estimated (from a private tail histogram" in out
    assert "release 1: private tail histogram, ε = 0.1" in out and "spent ε = 1 of 1" in out
    assert main(["demo", "--n", "3000", "--d", "3", "--no-progress", "--noise-seed", "0", "--G-k", "20",
                 "--G-2", "law", "--no-diagnostics"]) == 0
    out = capsys.readouterr().out
    # both bounds reach the plan: G_k = 20 is planned for, and the law's G₂ ≤ 0.85·G_k runs the clip rule
    assert "G_k = 20 (public: given), G₂ = " in out and "moment bound k = 4, G_k = 20" in out
    assert "G_2/G_k ≤ 0.85 and n·ε/d = 1000 < 2000" in out
    # a moment order the dataset's table lacks needs a number; with one the demo runs
    assert main(["demo", "--n", "2000", "--d", "3", "--no-progress", "--noise-seed", "0", "--moment-k", "3.5",
                 "--G-k", "20", "--no-diagnostics"]) == 0
    assert "k = 3.5, G_k = 20" in capsys.readouterr().out
    for flag, bad in (("--G-k", "-1"), ("--G-2", "auto"), ("--G-k", "nan"), ("--G-k", "0"), ("--G-2", "inf"),
                      ("--G-k", "law --moment-k 3.5")):
        try:
            main(["demo", "--n", "500", flag, *bad.split(), "--no-progress"])
        except SystemExit as exc:
            assert exc.code == 2
        else:
            raise AssertionError(f"{flag} {bad} was accepted")
        assert flag in capsys.readouterr().err


def test_bad_commands(capsys):
    assert main(["frobnicate"]) == 2
    assert main(["demo", "--epsilon", "-1", "--n", "500", "--no-progress"]) == 1
    assert "epsilon" in capsys.readouterr().err


def test_module_entry_point():
    proc = subprocess.run([sys.executable, "-m", "cvxdp", "--help"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and "demo" in proc.stdout


def test_demo_without_diagnostics_prints_only_what_is_private(capsys):
    assert main(["demo", "--n", "2000", "--d", "3", "--no-progress", "--noise-seed", "1",
                 "--no-diagnostics"]) == 0
    out = capsys.readouterr().out
    assert "private (ε-DP)" in out and "privacy ledger: spent ε = 1 of 1" in out
    for absent in ("certificates", "gap", "non-private ERM", "fit time", "diagnostics"):
        assert absent not in out


def test_demo_hides_only_the_announced_seeded_noise_warning(capsys):
    """The demo announces seeded noise and hides that warning; any other PrivacyLeakWarning (here ε > 100)
    is shown, as a direct fit would show it (found by review: every one was hidden)."""
    import warnings

    from cvxdp.error import PrivacyLeakWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["demo", "--n", "2000", "--d", "3", "--no-progress", "--noise-seed", "0",
                     "--epsilon", "1000", "--no-diagnostics"]) == 0
    leaks = [str(w.message) for w in caught if issubclass(w.category, PrivacyLeakWarning)]
    assert any("no meaningful privacy" in m for m in leaks)
    assert not any("cryptographically secure" in m for m in leaks)
