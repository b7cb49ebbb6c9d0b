"""The sim_ollama package's own tests: run in the venv the wheel is installed in
(scripts/setup-python-project.sh), by the suite's `clients` tests."""
import asyncio
import json
import os
import subprocess
import sys
import urllib.request

import pytest

import sim_ollama
from sim_ollama import JudgeFailure, Simulator, SimulatorError, find_binary


def chat(url, agent=None, content="hello", num_predict=8):
    body = json.dumps({
        "model": "gemma3", "stream": False, "options": {"num_predict": num_predict},
        "messages": [{"role": "user", "content": content}],
    }).encode()
    req = urllib.request.Request(url + "/api/chat", data=body, method="POST")
    req.add_header("Content-Type", "application/json")
    if agent:
        req.add_header("X-Agent", agent)
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def test_the_wheel_installs_both_binaries_and_python_m_runs_them():
    for name in ("sim-ollama", "harness"):
        assert os.access(find_binary(name), os.X_OK)
    out = subprocess.run([sys.executable, "-m", "sim_ollama", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("sim-ollama "), out
    out = subprocess.run([sys.executable, "-m", "sim_ollama.harness", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("harness "), out


def test_the_fixture_points_the_clients_at_the_simulator(sim):
    assert os.environ["OLLAMA_HOST"] == sim.url
    assert os.environ["OPENAI_BASE_URL"] == sim.url + "/v1"
    assert os.environ["SIM_OLLAMA_URLS"] == sim.url
    assert sim.url.startswith("http://127.0.0.1:")
    assert chat(sim.url)["done"] is True


def test_nothing_judged_is_an_answer_and_never_parallel(sim):
    j = sim.judge()
    assert (j.verdict, j.report.cause, j.report.requests) == ("inconclusive", "nothing_to_judge", 0)
    with pytest.raises(JudgeFailure) as e:
        sim.assert_parallel()
    assert "client: inconclusive (cause: nothing_to_judge)" in str(e.value)


def test_agents_one_after_another_fail_with_the_report(sim):
    for agent in ("a", "b", "c"):
        chat(sim.url, agent, num_predict=20)
    with pytest.raises(JudgeFailure) as e:
        sim.assert_parallel()
    j = e.value.judgement
    assert j.verdict == "serialized" and j.report.cause == "client", j
    text = str(e.value)
    assert text.startswith("the agents were not judged parallel"), text
    assert "\nclient: serialized (cause: client): " in text, text
    assert "\ndeployment: full (limit: none): " in text and "\nfailed: expected parallel, got serialized" in text


def test_labelled_agents_together_pass_and_the_mark_starts_a_new_window(sim):
    for agent in ("a", "b"):   # an earlier phase, one after another ...
        chat(sim.url, agent, num_predict=20)
    mark = sim.mark()          # ... is not judged after a mark
    # Calls of 200 tokens (~0.17 s at the fixture's time scale): long beside the few ms a
    # thread takes to start on a loaded machine (20-token calls read partly serialized, 76 %
    # saved, with four busy loops beside the suite).
    async def together():
        await asyncio.gather(*(asyncio.to_thread(chat, sim.url, a, "go", 200) for a in ("a", "b", "c")))
    asyncio.run(together())
    j = sim.assert_parallel()
    assert j.since == mark and j.report.agents == 3 and j.report.agents_from == "labels", j


@pytest.mark.asyncio
async def test_async_judge_keeps_the_loop_free(sim):
    await asyncio.gather(*(asyncio.to_thread(chat, sim.url, a, "go", 200) for a in ("a", "b")))
    j = await sim.aassert_parallel()
    assert j.passed and j.report.requests == 2


@pytest.mark.sim_ollama(preset="dual-two-devices", models=["gemma3", "qwen3:0.6b"], time_scale=0.05)
def test_the_marker_configures_the_simulator(sim):
    assert len(sim.urls) == 2
    assert os.environ["SIM_OLLAMA_URLS"] == ",".join(sim.urls)
    with urllib.request.urlopen(sim.urls[1] + "/api/ps") as r:
        loaded = sorted(m["name"] for m in json.loads(r.read())["models"])
    assert loaded == ["gemma3:latest", "qwen3:0.6b"], loaded


def test_judge_options_are_checked_by_the_simulator(sim):
    with pytest.raises(SimulatorError) as e:
        sim.judge(expect="fast")
    assert "400" in str(e.value) and "parallel" in str(e.value), e.value


def test_an_unknown_model_names_the_ones_there_are():
    with pytest.raises(SimulatorError) as e:
        Simulator(models=["llama9"]).start()
    assert "llama9" in str(e.value) and "gemma3:latest" in str(e.value), e.value


def test_a_stand_in_serves_the_programs_own_model_names():
    import ollama

    with Simulator(models=["mistral:7b"], stand_in="llama3.2:1b") as sim:
        client = ollama.Client(host=sim.url)
        r = client.chat(model="mistral:7b", messages=[{"role": "user", "content": "hi"}], options={"num_predict": 4})
        assert r.model == "mistral:7b" and r.message.content, r
        e = client.embed(model="my-embedder", input="hi")
        assert len(e.embeddings[0]) == 2048, len(e.embeddings[0])
        assert {m.model for m in client.list().models} >= {"mistral:7b", "my-embedder:latest"}
    with pytest.raises(SimulatorError) as e:
        Simulator(stand_in="mistral:7b").start()
    assert "not in the catalogue" in str(e.value), e.value


def test_the_stand_in_ini_option_reaches_the_fixture(pytester):
    pytester.makeini("[pytest]\nsim_ollama_stand_in = qwen3:0.6b\nsim_ollama_models = phi4\n")
    pytester.makepyfile(
        """
        import ollama

        def test_it(sim):
            r = ollama.Client(host=sim.url).show("phi4")
            assert "thinking" in r.capabilities, r.capabilities
        """
    )
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_an_unknown_preset_names_the_ones_there_are():
    with pytest.raises(SimulatorError) as e:
        Simulator(preset="fastest").start()
    assert "fastest" in str(e.value) and "ideal" in str(e.value), e.value


def test_ini_options_configure_the_fixture_and_a_failure_reads_as_the_report(pytester):
    pytester.makeini("[pytest]\nsim_ollama_preset = single-1slot\nsim_ollama_models = qwen3:0.6b\n")
    pytester.makepyfile(
        """
        import json, urllib.request

        def test_one_call_is_not_enough(sim):
            with urllib.request.urlopen(sim.url + "/api/ps") as r:
                assert [m["name"] for m in json.loads(r.read())["models"]] == ["qwen3:0.6b"]
            sim.assert_parallel()
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*the agents were not judged parallel", "*client: inconclusive (cause: nothing_to_judge)*"]
    )


def test_a_bad_ini_time_scale_is_a_usage_error(pytester):
    pytester.makeini("[pytest]\nsim_ollama_time_scale = fast\n")
    pytester.makepyfile("def test_x(sim):\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*sim_ollama_time_scale = 'fast' is not a positive number*"])


def test_the_public_names():
    assert sorted(sim_ollama.__all__) == sorted(
        ["BinaryNotFound", "ConfirmationNeeded", "Deployment", "JUDGEMENT_SCHEMA_VERSION", "JudgeFailure", "Judgement",
         "ProbeNeeded", "Report", "RerunNeeded", "RescaleNeeded", "Simulator", "SimulatorError", "find_binary"]
    )


# Three labelled agents: a call, a 0.3 s tool, a second call (issue 36). `blocking`: the tool is
# time.sleep inside the coroutine, holding the event loop; else an awaited sleep. The calls run
# on threads (asyncio.to_thread), so only the tools can hold the agents back.
AGENTS_WITH_TOOLS = """
import asyncio, json, time, urllib.request

def chat(url, agent, turn, labelled):
    body = json.dumps({"model": "gemma3", "stream": False, "options": {"num_predict": 20},
                       "messages": [{"role": "user", "content": f"{agent}: turn {turn}"}]}).encode()
    req = urllib.request.Request(url + "/api/chat", data=body, method="POST")
    req.add_header("Content-Type", "application/json")
    if labelled:
        req.add_header("X-Agent", agent)
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())

async def agent(url, name, blocking, seconds, labelled):
    await asyncio.to_thread(chat, url, name, 1, labelled)
    if blocking:
        time.sleep(seconds)
    else:
        await asyncio.sleep(seconds)
    await asyncio.to_thread(chat, url, name, 2, labelled)

async def agents(url, blocking, seconds=0.3, labelled=True):
    await asyncio.gather(*(agent(url, n, blocking, seconds, labelled) for n in ("a", "b", "c")))
"""


def test_judge_program_runs_a_program_again_when_the_gaps_between_calls_decide():
    namespace = {}
    exec(AGENTS_WITH_TOOLS, namespace)
    with Simulator() as sim:
        j = sim.judge_program(lambda: namespace["agents"](sim.url, True))
        assert j.report.gaps == "probed", j.explain()
        assert j.verdict in ("partly_serialized", "serialized") and j.report.cause == "between_calls", j.explain()
        # Resting on waits the probe found, the verdict was confirmed by a third run.
        confirmation = j.report.raw.get("confirmation") or {}
        assert confirmation.get("waits_recurred") is True and confirmation.get("kept") == "first", j.explain()
        j = sim.judge_program(lambda: namespace["agents"](sim.url, False))
        assert j.verdict == "parallel", j.explain()


def test_judge_program_runs_the_program_again_when_the_simulator_itself_was_late():
    # As the fixture's test below: the simulator stopped for 0.6 s inside the first run's
    # first calls; the first verdict is the machine's (simulator_late), the second run's stands.
    namespace = {}
    exec(AGENTS_WITH_TOOLS, namespace)
    runs = []
    with Simulator(time_scale=0.5) as sim:

        def program():
            runs.append(1)
            if len(runs) == 1:
                stop = f"sleep 0.05; kill -STOP {sim._proc.pid}; sleep 0.6; kill -CONT {sim._proc.pid}"
                subprocess.Popen(["sh", "-c", stop])
            asyncio.run(namespace["agents"](sim.url, False, 0.05))

        j = sim.judge_program(program)
        assert len(runs) == 2 and j.verdict == "parallel", j.explain()


def test_judge_program_tells_unlabelled_agents_apart_by_a_probe_run():
    # No X-Agent, each call a prompt of its own: nothing tells the agents apart in one run, and
    # their pauses may be tools run together or in turn. The probe run releases one answer at a
    # time; told three agents run, its three chains are them. (Blocking tools, caught between
    # calls the same way: the suite's Python client tests.)
    namespace = {}
    exec(AGENTS_WITH_TOOLS, namespace)
    with Simulator() as sim:
        j = sim.judge_program(lambda: namespace["agents"](sim.url, False, labelled=False), agents=3)
        assert j.report.agents_from == "probe" and j.report.agents == 3, j.explain()
        assert j.verdict == "parallel", j.explain()


# Four labelled agents: four calls each, and between them a 0.2 s tool under a semaphore of
# `permits` (a leftover sized for two agents, in the buggy program).
PERMIT_AROUND_A_TOOL = """
import asyncio, json, urllib.request

def chat(url, agent, turn):
    body = json.dumps({"model": "gemma3", "stream": False, "options": {"num_predict": 20},
                       "messages": [{"role": "user", "content": f"{agent}: turn {turn}"}]}).encode()
    req = urllib.request.Request(url + "/api/chat", data=body, method="POST")
    req.add_header("Content-Type", "application/json")
    req.add_header("X-Agent", agent)
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())

async def agent(url, name, permit):
    for turn in range(4):
        await asyncio.to_thread(chat, url, name, turn)
        if turn < 3:
            async with permit:
                await asyncio.sleep(0.2)

async def agents(url, permits):
    permit = asyncio.Semaphore(permits)
    await asyncio.gather(*(agent(url, n, permit) for n in ("a", "b", "c", "d")))
"""


def test_judge_program_weighs_the_agents_waits_against_this_processs_cpu():
    # After the first round each agent waits about 0.13 s for the permit at every step, under
    # the judge's floor for a library's processing taking turns; this process ran far too
    # little on a CPU to explain that (the simulator samples it: --client-pid), so the waits
    # count and settle the verdict (docs/judge.md, "The program's CPU").
    namespace = {}
    exec(PERMIT_AROUND_A_TOOL, namespace)
    with Simulator() as sim:
        j = sim.judge_program(lambda: namespace["agents"](sim.url, 2))
        assert (j.verdict, j.report.cause) == ("partly_serialized", "between_calls"), j.explain()
        assert "at most 2 of 4 agents' local work ran at a time" in j.report.reason, j.explain()
        j = sim.judge_program(lambda: namespace["agents"](sim.url, 4))
        assert j.verdict == "parallel", j.explain()


def test_the_fixture_runs_the_test_again_as_a_probe_run_when_the_gaps_decide(pytester):
    pytester.makepyfile(
        AGENTS_WITH_TOOLS
        + """
RUNS = []

def test_blocking_tools(sim):
    RUNS.append("blocking")
    asyncio.run(agents(sim.url, True))
    sim.assert_parallel()

def test_awaited_tools(sim):
    # Tools too short to hide another agent's: judged from one run, never run again.
    RUNS.append("awaited")
    asyncio.run(agents(sim.url, False, 0.1))
    sim.assert_parallel()
    assert RUNS.count("awaited") == 1
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1, passed=1)
    # The blocking test ran twice (its second run the probe) and fails on the judge's words,
    # not on the request for a probe.
    result.stdout.fnmatch_lines(["*serialized (cause: between_calls)*"])
    result.stdout.no_fnmatch_line("*ProbeNeeded*")


def test_the_fixture_confirms_waits_a_pause_of_the_whole_process_made(pytester):
    # Correct agents (awaited tools), and in the test's first run the whole process stops for
    # 0.8 s while their tools run (SIGSTOP from a sibling shell: a starved machine, a long
    # garbage collection). Against the probe run the agents look as if they waited for each
    # other; the fixture runs the test a third time, the waits do not recur, and it passes.
    pytester.makepyfile(
        AGENTS_WITH_TOOLS
        + """
import os, subprocess
RUNS = []

async def paused(url, pause):
    async def one(name):
        await asyncio.to_thread(chat, url, name, 1, True)
        if pause and name == "c":
            pid = os.getpid()
            subprocess.Popen(["sh", "-c", f"sleep 0.2; kill -STOP {pid}; sleep 0.8; kill -CONT {pid}"])
        await asyncio.sleep(0.3)
        await asyncio.to_thread(chat, url, name, 2, True)
    await asyncio.gather(*(one(n) for n in "abc"))

def test_paused_once(sim):
    RUNS.append(1)
    asyncio.run(paused(sim.url, len(RUNS) == 1))
    j = sim.assert_parallel()
    print(f"runs: {len(RUNS)}; first pair: {j.report.raw['confirmation']['first']}")
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s")
    result.assert_outcomes(passed=1)
    # Three runs: the first (paused), the probe, the confirmation; the first pair alone was not
    # parallel.
    result.stdout.fnmatch_lines(["*runs: 3; first pair: *"])
    result.stdout.no_fnmatch_line("*first pair: parallel*")


SPACED = """
import asyncio, json, threading, time, urllib.request

def chat(url, agent):
    body = json.dumps({"model": "gemma3", "stream": False, "options": {"num_predict": 20},
                       "messages": [{"role": "user", "content": f"{agent}: review"}]}).encode()
    req = urllib.request.Request(url + "/api/chat", data=body, method="POST", headers={"X-Agent": agent})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())

async def on_timers(url):
    # Three agents on their own timers, 0.3 s apart (a framework's start-up): at time scale 0.1
    # their calls (~45 ms) never overlap, though none waits for another's answer.
    async def one(i, name):
        await asyncio.sleep(0.3 * i)
        await asyncio.to_thread(chat, url, name)
    await asyncio.gather(*(one(i, n) for i, n in enumerate("abc")))
"""


def test_calls_that_never_overlapped_are_probed_and_the_program_not_blamed_for_its_own_delays():
    namespace = {}
    exec(SPACED, namespace)
    with Simulator() as sim:
        # (Agents waiting for each other's answers stay serialized: the Rust suite's
        # probe::calls_that_never_overlapped_are_probed_by_holding_every_answer.)
        j = sim.judge_program(lambda: namespace["on_timers"](sim.url))
        assert (j.verdict, j.report.cause, j.report.held) == ("inconclusive", "time_scale", "did_not_wait"), j.explain()
        # Judged again at the longer time scale the report named (1), the timers' 0.3 s still
        # cost time against calls of ~0.46 s, and no run tells timers from blocking start-ups
        # taking turns: inconclusive there too; the first verdict stands, never a blame.
        assert sim.rescaled and sim.time_scale == 1.0


def test_an_error_in_a_probe_run_says_it_came_in_one(pytester):
    # Agents whose calls never overlapped, after delays longer than a call: the fixture runs
    # the body again as a probe run holding every answer, and there the body raises (as a
    # program with a timeout shorter than a real call would): the failure says where it came.
    pytester.makepyfile(
        SPACED
        + """
RUNS = []

def test_fails_when_probed(sim):
    RUNS.append(1)
    if len(RUNS) == 2:
        raise TimeoutError("the reviewer timed out")
    asyncio.run(on_timers(sim.url))
    sim.assert_parallel()
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*TimeoutError: the reviewer timed out*", "*this error came in a probe run*"])


def test_the_fixture_runs_the_test_again_when_the_simulator_itself_was_late(pytester):
    # Correct agents; in the test's first run the simulator process stops for 0.6 s while their
    # first calls stream (SIGSTOP from a sibling shell: a machine too busy to run it on time).
    # Their answers come late by as much as the run lost: the verdict is the machine's (cause
    # simulator_late), the fixture runs the test again in a new window, and that run passes.
    # Time scale 0.5: the first calls stream ~0.25 s, so the stop at 0.05 s lands inside them.
    pytester.makepyfile(
        AGENTS_WITH_TOOLS
        + """
import subprocess
import pytest
RUNS = []

@pytest.mark.sim_ollama(time_scale=0.5)
def test_late_once(sim):
    RUNS.append(1)
    if len(RUNS) == 1:
        pid = sim._proc.pid
        subprocess.Popen(["sh", "-c", f"sleep 0.05; kill -STOP {pid}; sleep 0.6; kill -CONT {pid}"])
    asyncio.run(agents(sim.url, False, 0.05))
    print(f"run {len(RUNS)}: {sim.judge().report.cause}")
    sim.assert_parallel()
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*run 1: simulator_late*", "*run 2: none*"])


# Six tickets, a thread each, unlabelled, started 40 ms apart by a launcher: at time scale 0.1
# the calls (~64 ms) are shorter than that start-up (200 ms), which is the program's own (a
# probe run has every first call out before any answer): inconclusive (`time_scale`), the
# report naming a longer time scale (1, real speed), where the calls (~0.64 s) outlast it.
LAUNCHER = """
import json, threading, time, urllib.request

def ticket(url, i):
    body = json.dumps({"model": "gemma3", "prompt": f"Ticket {i}: classify it.", "stream": False,
                       "options": {"num_predict": 40}}).encode()
    urllib.request.urlopen(urllib.request.Request(url + "/api/generate", data=body, method="POST"), timeout=60).read()

def launch(url):
    threads = []
    for i in range(6):
        time.sleep(0.04)
        t = threading.Thread(target=ticket, args=(url, i))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
"""


def test_judge_program_judges_again_at_the_longer_time_scale_a_launchers_start_up_needs():
    namespace = {}
    exec(LAUNCHER, namespace)
    with Simulator() as sim:
        port = sim.url
        j = sim.judge_program(lambda: namespace["launch"](sim.url))
        assert j.report.verdict == "parallel", j.explain()
        assert sim.rescaled and sim.time_scale == 1.0
        assert sim.url == port, "one instance: restarted on the same port"
        assert j.raw["report"]["time"]["time_scale"] == 1.0


def test_the_fixture_runs_the_test_again_at_the_longer_time_scale_the_report_names(pytester):
    pytester.makepyfile(
        LAUNCHER
        + """
import os

def test_launcher(sim):
    launch(os.environ["OLLAMA_HOST"])
    sim.assert_parallel()
    print("judged at", sim.time_scale, "rescaled", sim.rescaled)
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s")
    assert result.ret == 0, result.stdout.str()[-4000:]
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*judged at 1.0 rescaled True*"])


def test_the_fixture_keeps_the_inconclusive_verdict_where_the_longer_time_scale_reads_the_programs_own_delays(pytester):
    # Agents on their own timers 0.3 s apart (`SPACED`): inconclusive at 0.1; at 1, the
    # longer time scale the report names, the timers still cost time against calls of ~0.46 s,
    # and their first calls went out one after another waiting for no answer (timers of their
    # own or blocking start-ups taking turns: inconclusive there too): the test fails with the
    # inconclusive report and what the longer time scale read, never blamed on the client.
    pytester.makepyfile(
        SPACED
        + """
import asyncio, os

def test_on_timers(sim):
    asyncio.run(on_timers(os.environ["OLLAMA_HOST"]))
    sim.assert_parallel()
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*at time scale 1.0 it read inconclusive*the program's own delays*"])
    result.stdout.fnmatch_lines(["*client: inconclusive (cause: time_scale)*"])
    result.stdout.no_fnmatch_line("*client: partly serialized*")
