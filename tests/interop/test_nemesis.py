"""The nemesis in CI: a fixed set of seeds, each a schedule of faults against
`sluice cluster up --proxied` with clients reading, writing durably and compare-and-setting,
and the history checked for linearizability (nemesis.py, linearizability.py).

Each run prints its seed and schedule (shown with `-s`, and in the report when it fails). A
failing seed replays with `scripts/nemesis --seed N --duration D`. The seeds were chosen to
cover both replica counts and every fault; `test_the_seeds_cover_every_fault` keeps them
honest if the schedule's draw changes.
"""

from __future__ import annotations

import pytest

import nemesis

# seed -> seconds of faults. Together about five minutes of CI on 2 cores.
SEEDS = {2: 40, 5: 40, 7: 40}


@pytest.mark.timeout(420)
@pytest.mark.parametrize("seed", sorted(SEEDS))
def test_nemesis_history_is_linearizable(seed, tmp_path):
    lines = []

    def log(line: str) -> None:
        lines.append(line)
        print(line, flush=True)

    report = nemesis.run(seed, SEEDS[seed], work=tmp_path, log=log)
    assert report.ok, (f"seed {seed} (replay: scripts/nemesis --seed {seed} "
                       f"--duration {SEEDS[seed]}):\n" + "\n".join(report.failures)
                       + "\n--- the run ---\n" + "\n".join(lines))


def test_the_seeds_cover_every_fault_and_both_replica_counts():
    """The fixed seeds draw 1 and 2 replicas and, among the faults a run surely reaches
    (a fault with its recovery takes under 7 s of the 40), each kind at least once."""
    replicas, faults = set(), set()
    for seed, duration in SEEDS.items():
        r, steps = nemesis.plan(seed)
        replicas.add(r)
        faults |= {s.fault for s in steps[:duration // 7]}
    assert replicas == {1, 2}
    assert faults == set(nemesis.FAULTS)
