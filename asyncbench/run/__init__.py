"""The run path: from a run's configuration to its booked results.

    flow      plan it, then execute it (or price it, for `--dry-run`)
    plan      RunConfig -> frozen RunPlan (benchmark, samples, clients, budget, runner)
    resolve   what the user named -> what a run talks to (model spec, budget, tokenizer)
    prompting sample -> the request a run sends (the benchmark's prompt rules applied)
    execute   a RunPlan -> generate -> score -> record; owns the generator's state
    generate  cache-first generation (`CacheFirst`): requests -> (cache | runner) -> answers
    record    closing an invocation: ledger rows, scores, the summary
    reuse     a re-run of a complete run, booked from the store
    dry_run   what a plan would send and cost, sending nothing
    eval_set  several models x benchmarks as one plan, one budget, one output

Nothing here names a benchmark: benchmarks are reached through the registry
(`asyncbench.benchmarks`) and their base types, and declare their prompt rules as values.
"""
