"""Real-model evaluation in reply-folder mode, one short device call per reply round (issue 24, 3).

    source scripts/device_env.sh; source scripts/device_bwrap.sh
    export KERNELOPT_HOME=$(mktemp -d /tmp/eval-home-XXXX)
    python3 -m scripts.llm_eval start --problems P1.py P2.py ... --rounds 2 [--budget-s 450]
    python3 -m scripts.llm_eval resume --home home.tgz --replies DIR_OR_TGZ [--budget-s 450]
    python3 -m scripts.llm_eval report --home home.tgz --out DIR
    python3 -m scripts.llm_eval compare --run run1=R1/report.json --run run2=R2/report.json

``start --proposer builtin`` runs the same chain of calls for built-in campaigns
(no requests): one campaign carried across machine loans (issue 31).

Run from the repository root (``scripts`` is a package: nothing patches
``sys.path``).  Modules: ``commands`` (the three commands and
one call around them), ``services`` (server and workers), ``watch`` (what each
campaign is doing), ``replies``, ``packing`` (what goes back to $OUT),
``report`` (the outcome table), ``compare`` (runs side by side), ``record`` (the evaluation's own record) and
``stream`` (progress as it happens).

Each LLM request of a folder-mode campaign is a self-contained file that an
independent model answers out of band, so an evaluation is a chain of short
calls on a machine that is gone between them.  One call:

1. ``start``: submits one campaign per problem (the CLI's own option building
   and ``kernelopt.campaigns``, with ``KERNELOPT_LLM_MODE=folder``);
   ``resume``: restores ``KERNELOPT_HOME`` from the previous call's
   ``home.tgz`` (``kernelopt state import``), draws again the tensors the
   last pack left behind (below), and delivers every reply file of
   ``--replies`` through ``kernelopt reply``'s own code (file written, search
   signalled); a file naming no waiting request is skipped and said so;
2. starts the embedded Temporal server and the local workers (the ones
   ``kernelopt optimize`` starts: a CPU worker, one GPU worker per GPU), plus
   any ``--extra-worker`` command (tests: a GPU stand-in), and waits until
   they poll;
3. lets the campaigns run until each one has finished or waits only for
   replies (or, with no GPU worker of ours or anyone's polling, for a GPU),
   the same for QUIET_S, or ``--budget-s`` is reached, or SIGTERM / SIGINT;
4. stops workers and server cleanly and packs ``KERNELOPT_HOME`` with
   ``kernelopt state export`` (server database, artifact store, result index,
   reply folder; logs, pid files and compiler caches stay behind) into
   ``$OUT/home.tgz``, the requests still waiting into ``$OUT/requests.tgz``
   (one ``ID.json`` each: answer it as ``ID.txt`` in the next call's replies).

**Thin homes.**  A device call carries 64 MiB in all (the tree, ``.whl`` and
``.device`` take ~57) and brings back files of at most 16 MiB, but a
problem's captured tensors are 20-600 MiB.  So ``home.tgz`` is written by
``kernelopt state export --thin`` (``kernelopt.thin_home``: each compile's
seed-drawn tensors, checked here to draw again to their recorded digests, and
its reference output stay behind; ``resume`` draws the tensors again and checks
them before any worker starts), and leaves behind besides the raw Nsight
Compute reports, which no later step reads, and, once every campaign has
finished, every tensor archive over 1 MiB.

What comes back (6 files, all under ``--out``, default ``$OUT``):
``progress.jsonl`` (one event per line, flushed as it happens: a call cut at
its time limit still says what it did), ``progress.md`` (the campaigns' table,
rewritten as they move; at the end, the per-problem outcome table),
``home.tgz`` (also written as a live snapshot every ``--snapshot-s``, so a cut
call leaves one to resume from), ``requests.tgz``, ``logs.tgz`` (server and
worker logs, their tails) and ``summary.json`` (why the call stopped, each
campaign's state, the table's rows, the archive's size).

Search settings (``start``; why these): ``--rounds`` is the search's T
(iterations); ``--plans 2`` (N) gives each round two candidates, enough to
compare replies and to let screening rank something; ``--retries 1`` (K) gives
a rejected candidate one fix, which exercises the retry-fix prompt but adds a
reply round only where a candidate failed; ``--beam 1`` re-times only the best
state; ``--max-targets 1`` searches only the first of triage's targets (the
largest share of GPU time): a campaign searches its targets one after another,
each with its own profile and requests.  Per iteration a campaign then needs
3-4 reply rounds (plan; execute; retry-fix where a candidate failed;
summarize), of which only those after execute and retry-fix replies (the
gates) and the last one (re-stitch, gates 3-4) do GPU work.
docs/TEAM_NOTES.md ("Real-model evaluation") has the device command sequence
and the time each round needs.

The evaluation's own record (problems, campaign ids, options, one line per
call) is ``refs/llm-eval/eval.json`` in the artifact store, so it travels in
every ``home.tgz``.
"""
