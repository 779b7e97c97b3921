"""A local endpoint simulator speaking the OpenAI, Anthropic and TGI wire formats.

Tests, demos and benchmarks run against it instead of faking an API in-process:

    from asyncbench.sim.server import SimConfig, run_sim_in_thread
    with run_sim_in_thread(SimConfig(rpm=600)) as sim:
        ...  # AsyncOpenAI(base_url=sim.base_url + "/v1", api_key="x")

or as a process: `asyncbench simulate --port 0` / `python -m asyncbench.sim --port 0
--port-file PATH` (see `asyncbench.sim.testing.start_sim_subprocess`).
"""
