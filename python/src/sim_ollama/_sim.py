"""Start the simulator, take a mark, ask the judge: the HTTP API of docs/judge.md ("Over HTTP")
from Python, with the standard library only."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ._binary import find_binary

#: The judgement document's schema version this module reads (docs/judge.md).
JUDGEMENT_SCHEMA_VERSION = 2

#: How long the simulator may take to load its models and listen.
START_TIMEOUT_S = 60.0


# Said with an error a program raised in a probe run (its first run raised none).
PROBE_FAILED = (
    "sim-ollama: this error came in a probe run: the program ran again, the simulator holding "
    "answers back (as longer calls would be) to tell what its first run could not; the first "
    "run's verdict asked for it. A program that fails when answers come later may fail at real "
    "speed too (docs/judge.md, 'The probe run')."
)


class SimulatorError(RuntimeError):
    """The simulator could not start, or answered a request with an error (Ollama's shape:
    the message is its `error` text)."""

    __module__ = "sim_ollama"


class JudgeFailure(AssertionError):
    """The judge did not pass the agents; the message is its report in words."""

    __module__ = "sim_ollama"

    def __init__(self, judgement: "Judgement", headline: str):
        self.judgement = judgement
        super().__init__(f"{headline}\n{judgement.explain()}")


class ProbeNeeded(JudgeFailure):
    """The verdict waits on a probe run: the gaps between the agents' calls could be their
    own work or waiting for each other's, and one run cannot tell (cause `unprobed_gaps`).
    Under pytest the `sim` fixture answers it by running the test once more as a probe run
    (docs/python.md); elsewhere, `Simulator.judge_program` runs the program twice."""

    __module__ = "sim_ollama"


class RerunNeeded(JudgeFailure):
    """The verdict may be the machine's, not the program's (`Report.needs_rerun`: the run lost
    no more time than the simulator itself was late sending answers, cause `simulator_late`,
    or its whole shortfall is one stall reading the last answer, `client_lag`). Under pytest
    the `sim` fixture answers it by running the test once more in a new window, whose verdict
    stands; elsewhere, `Simulator.judge_program` does."""

    __module__ = "sim_ollama"


class RescaleNeeded(JudgeFailure):
    """The verdict is inconclusive for the time scale (cause `time_scale`: the program's own
    delays, a launcher's start-up or its timers, outlast calls this short), and the report
    names a longer one (`Report.longer_time_scale`). Under pytest the `sim` fixture answers it
    by restarting the simulator at that time scale (same port where it has one instance) and
    running the test once more, whose verdict stands; elsewhere, `Simulator.judge_program`
    does."""

    __module__ = "sim_ollama"


class ConfirmationNeeded(JudgeFailure):
    """The verdict rests on waits a probe run found (the agents waited for each other between
    their calls), and a pause of the whole process in one of the two runs (a garbage
    collection over a large heap, a starved machine) would read the same: one more run, the
    report's `confirm` says which, tells (docs/judge.md, "A confirmation run"). Under pytest
    the `sim` fixture answers it by running the test a third time; elsewhere,
    `Simulator.judge_program` does."""

    __module__ = "sim_ollama"


@dataclass(frozen=True)
class Deployment:
    """What the deployment allows: `full`, `partial`, `no_speedup` or `unknown`, what limits
    it (`none`, `slots`, `queue`, `shared_device`, `batch`, `loads`, `cpu`, `unknown`) and
    the speedup a perfectly concurrent client gets on it. `costs`: what each limit costs,
    seconds, the largest first, whatever the verdict (a `full` deployment's one slot still
    costs its queueing)."""

    verdict: str
    limit: str
    reason: str
    speedup: Optional[float]
    ideal_speedup: Optional[float]
    costs: List[Tuple[str, float]] = field(default_factory=list)

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "Deployment":
        costs = [(c["limit"], float(c["seconds"])) for c in d.get("costs", [])]
        return cls(d["verdict"], d["limit"], d["reason"], d.get("speedup"), d.get("ideal_speedup"), costs)


@dataclass(frozen=True)
class Report:
    """The judge's report on the client: `parallel`, `partly_serialized`, `serialized` or
    `inconclusive`, the cause it blames in the client (`none`, `client`, `connection_pool`,
    `client_lag`, `unknown_agents`, `unknown_deployment`, `between_calls`, `unprobed_gaps`,
    `simulator_late`, `time_scale`, `nothing_to_judge`), why, and the figures. `gaps` says whether the gaps between the
    agents' calls were their own work (`settled`, `unprobed`, `probed`, `known`, `void`, or
    None where the agents could not be told apart). `raw` is the whole report as the
    simulator sent it."""

    verdict: str
    cause: str
    reason: str
    deployment: Deployment
    notes: List[str]
    agents: int
    agents_from: str
    requests: int
    failed: int
    took_s: float
    sequential_s: float
    allowed_s: float
    ideal_s: float
    saving: Optional[float]
    raw: Dict[str, Any] = field(repr=False, compare=False)
    gaps: Optional[str] = None

    @property
    def needs_rerun(self) -> bool:
        """Whether the verdict may be the machine's, not the program's: inconclusive because
        the run lost no more than the simulator itself was late (`simulator_late`) or its whole
        shortfall is one stall reading the last answer (`client_lag`). The program is to run
        again in a new window, whose verdict stands."""
        return bool(self.raw.get("rerun"))

    @property
    def held(self) -> Optional[str]:
        """For calls that never overlapped, each after a gap longer than a call: whether they
        waited for each other's answers (`unprobed`, `waited`, `did_not_wait`, `void`,
        `too_long`), as a probe run holding every answer shows, or `followed`: each call's start
        moved with the answer before it, which shows it from the run judged; None otherwise."""
        return (self.raw.get("held") or {}).get("status")

    @property
    def needs_probe(self) -> bool:
        """Whether the verdict waits on a probe run: the gaps between calls decide it, a
        program whose agents the judge cannot tell apart read short of parallel (a probe run
        releasing one answer at a time tells them apart), or calls that never overlapped came
        after gaps longer than themselves (a probe run holding every answer tells whether they
        waited for each other)."""
        return bool(self.raw.get("needs_probe", self.gaps == "unprobed"))

    @property
    def longer_time_scale(self) -> Optional[float]:
        """Where the verdict is inconclusive for the time scale (`time_scale`): the time scale
        (1 at most) at which the calls would outlast the program's own delays, to judge it
        again at; None otherwise."""
        value = self.raw.get("longer_time_scale")
        return None if value is None else float(value)

    @property
    def confirm(self) -> Optional[str]:
        """Which run a confirmation run should repeat (`plain`: the run judged; `probe`: the
        probe run), where the verdict rests on waits a probe run found and none ran yet."""
        return self.raw.get("confirm")

    @property
    def needs_confirmation(self) -> bool:
        """Whether the verdict should be confirmed by one more run (`confirm` says which)."""
        return self.confirm is not None

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "Report":
        t = d["time"]
        return cls(
            verdict=d["verdict"],
            cause=d["cause"],
            reason=d["reason"],
            deployment=Deployment._from(d["deployment"]),
            notes=list(d.get("notes", [])),
            agents=len(d.get("agents", [])),
            agents_from=d.get("agents_from", ""),
            requests=d["requests"],
            failed=d["failed"],
            took_s=t["took_s"],
            sequential_s=t["sequential_s"],
            allowed_s=t["allowed_s"],
            ideal_s=t["ideal_s"],
            saving=t.get("saving"),
            gaps=(d.get("gaps") or {}).get("status"),
            raw=d,
        )


@dataclass(frozen=True)
class Judgement:
    """`GET /sim/judge`'s answer: the report on the requests since `since`, the expectations
    it was asked to check, whether they all `passed`, and the `failures` in words."""

    since: int
    seed: int
    expectations: Dict[str, Any]
    passed: bool
    failures: List[str]
    report: Report
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Judgement":
        version = d.get("schema_version")
        if version != JUDGEMENT_SCHEMA_VERSION:
            raise SimulatorError(
                f"the simulator answered judgement schema {version!r}; this module reads "
                f"{JUDGEMENT_SCHEMA_VERSION}: install the wheel and binary of one release"
            )
        return cls(
            since=d["since"],
            seed=d["seed"],
            expectations=dict(d.get("expectations", {})),
            passed=d["passed"],
            failures=list(d["failures"]),
            report=Report._from(d["report"]),
            raw=d,
        )

    @property
    def verdict(self) -> str:
        """The client verdict."""
        return self.report.verdict

    def explain(self) -> str:
        """The report in words, as `harness exec` prints it."""
        r = self.report
        lines = [
            f"client: {r.verdict.replace('_', ' ')} (cause: {r.cause}): {r.reason}",
            f"deployment: {r.deployment.verdict.replace('_', ' ')} (limit: {r.deployment.limit}): "
            f"{r.deployment.reason}",
        ]
        lines += [f"note: {n}" for n in r.notes]
        # A failure repeats the reason it rests on; the lines above already give it.
        lines += [f"failed: {f.replace(': ' + r.reason, '')}" for f in self.failures]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.explain()


class Simulator:
    """A `sim-ollama` process on a free loopback port, for one test or one session.

    >>> with Simulator(models=["gemma3"]) as sim:      # doctest: +SKIP
    ...     run_agents(host=sim.url)
    ...     sim.assert_parallel()

    Defaults: the `ideal` preset (any serialization is the program's), time scale 0.1 (a
    10 s call takes 1 s), `gemma3` loaded before the program starts (a cold load never lands
    in the judged window), and a mark taken once it listens. Unknown presets or models are
    refused by the simulator, and its message (naming the valid ones) is the error;
    `stand_in="llama3.2:1b"` answers for every model name the catalogue lacks with a copy of
    that catalogue model, so a program naming its own model (`models=["mistral:7b"]`) runs
    unchanged.
    """

    def __init__(
        self,
        *,
        preset: Optional[str] = "ideal",
        config: Optional[str] = None,
        models: Sequence[str] = ("gemma3",),
        time_scale: float = 0.1,
        seed: Optional[int] = None,
        instances: Optional[int] = None,
        num_parallel: Optional[int] = None,
        stand_in: Optional[str] = None,
        args: Sequence[str] = (),
        binary: Optional[str] = None,
    ):
        if isinstance(models, str):
            models = [models]
        if config is not None:
            preset = None
        self._argv = [binary or find_binary("sim-ollama"), "--port", "0"]
        if preset:
            self._argv += ["--preset", preset]
        if config:
            self._argv += ["--config", str(config)]
        self.time_scale = float(time_scale)
        self._argv += ["--time-scale", repr(self.time_scale)]
        for m in models:
            self._argv += ["--preload", m]
        if seed is not None:
            self._argv += ["--seed", str(int(seed))]
        if instances is not None:
            self._argv += ["--instances", str(int(instances))]
        if num_parallel is not None:
            self._argv += ["--num-parallel", str(int(num_parallel))]
        if stand_in is not None:
            self._argv += ["--stand-in", str(stand_in)]
        # This process runs the agents: the simulator samples its CPU time and waits for a CPU
        # (itself left out) and gives them to the judge, which weighs the agents' waits for each
        # other against them (docs/judge.md, "The program's CPU").
        self._argv += ["--client-pid", str(os.getpid())]
        self._argv += [str(a) for a in args]
        self._ready = False
        self._proc: Optional[subprocess.Popen] = None
        self._stderr = None
        self.urls: List[str] = []

    # -- life cycle ---------------------------------------------------------------------

    def start(self) -> "Simulator":
        """Start the process and wait until every instance listens."""
        if self._proc is not None:
            return self
        self._stderr = tempfile.TemporaryFile()
        env = dict(os.environ)
        # The simulator reads these as its own settings; the program's values are not ours.
        for k in ("OLLAMA_HOST", "OLLAMA_NUM_PARALLEL", "OLLAMA_MAX_QUEUE", "OLLAMA_KEEP_ALIVE"):
            env.pop(k, None)
        self._proc = subprocess.Popen(
            self._argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._stderr, env=env
        )
        lines: List[str] = []
        self.urls, self._ready = [], False
        reader = threading.Thread(target=self._read_urls, args=(lines,), daemon=True)
        reader.start()
        reader.join(START_TIMEOUT_S)
        if not self._ready:
            code = self._proc.poll()
            self.stop()
            what = f"exited with code {code}" if code is not None else f"did not listen within {START_TIMEOUT_S:.0f} s"
            raise SimulatorError(f"sim-ollama {what}: {self._stderr_text() or ' '.join(lines)}".strip())
        threading.Thread(target=self._drain, daemon=True).start()
        return self

    def _read_urls(self, lines: List[str]) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for raw in self._proc.stdout:
            line = raw.decode("utf-8", "replace").strip()
            lines.append(line)
            if line.startswith("sim-ollama listening on "):
                self.urls.append(line.rsplit(" ", 1)[1])
            elif line.startswith("sim-ollama ready"):
                self._ready = True
                return

    def _drain(self) -> None:
        proc = self._proc
        if proc is not None and proc.stdout is not None:
            for _ in proc.stdout:
                pass

    def _stderr_text(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        return self._stderr.read().decode("utf-8", "replace").strip()

    def stop(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL after 5 s)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    def __enter__(self) -> "Simulator":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    # -- where it listens ---------------------------------------------------------------

    @property
    def url(self) -> str:
        """The first instance's base URL (`http://127.0.0.1:PORT`): OLLAMA_HOST."""
        if not self.urls:
            raise SimulatorError("the simulator is not running: call start() or use `with`")
        return self.urls[0]

    @property
    def openai_base_url(self) -> str:
        """The OpenAI-compatible base URL (`.../v1`), for the OpenAI SDKs."""
        return self.url + "/v1"

    @property
    def environment(self) -> Dict[str, str]:
        """What a program needs to talk to the simulator: OLLAMA_HOST, the OpenAI and
        Anthropic base URLs, SIM_OLLAMA_URLS (every instance)."""
        return {
            "OLLAMA_HOST": self.url,
            "OPENAI_BASE_URL": self.openai_base_url,
            "ANTHROPIC_BASE_URL": self.url,
            "SIM_OLLAMA_URLS": ",".join(self.urls),
        }

    # -- the judge ----------------------------------------------------------------------

    def _request(self, method: str, path: str, timeout: float) -> Dict[str, Any]:
        req = urllib.request.Request(self.url + path, method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as e:
            body = e.read().decode("utf-8", "replace")
            try:
                message = json.loads(body)["error"]
            except (ValueError, KeyError, TypeError):
                message = body or e.reason
            raise SimulatorError(f"{method} {path}: {e.code}: {message}") from None
        except urllib.error.URLError as e:
            raise SimulatorError(f"{method} {path}: the simulator did not answer: {e.reason}") from None

    def mark(self) -> int:
        """Start a new judged window: the judge reads only requests after the mark."""
        self._probing = False
        self._confirming = False
        self._rerunning = False
        return int(self._request("POST", "/sim/mark", 10)["mark"])

    def rerun(self) -> int:
        """The program judged since the mark is about to run again because its verdict may
        be the machine's (`Report.needs_rerun`): a new window (a mark), whose verdict stands;
        one rerun per mark. Returns the mark."""
        mark = self.mark()
        self._rerunning = True
        return mark

    @property
    def rerunning(self) -> bool:
        """Whether this window is a rerun after a verdict that may have been the machine's."""
        return getattr(self, "_rerunning", False)

    def rescale(self, time_scale: float) -> int:
        """Restart the simulator at `time_scale` (a verdict inconclusive for the time scale
        named it: `Report.longer_time_scale`), on the same port where it runs one instance
        (the program's clients keep their address; with several, on new ports: `environment`
        has them), its models loaded again, and take a mark: the program runs again there,
        its verdict standing. Once per simulator. Returns the mark."""
        argv = list(self._argv)
        i = argv.index("--time-scale")
        argv[i + 1] = repr(float(time_scale))
        if len(self.urls) == 1:
            argv[argv.index("--port") + 1] = self.urls[0].rsplit(":", 1)[1]
        self.stop()
        self._argv, self.time_scale = argv, float(time_scale)
        self.start()
        self._rescaled = True
        return self.mark()

    @property
    def rescaled(self) -> bool:
        """Whether the simulator was restarted at a longer time scale (`rescale`)."""
        return getattr(self, "_rescaled", False)

    def _longer(self, j: "Judgement") -> Optional[float]:
        """The longer time scale a verdict inconclusive for its time scale names, where this
        simulator has not been restarted at one yet and it is longer than its own."""
        t = j.report.longer_time_scale
        return t if t is not None and not self.rescaled and t > self.time_scale * 1.05 else None

    def probe(self) -> int:
        """The program judged since the mark is about to run again as a probe run: the
        simulator holds answers back so its agents do their local work one at a time, and the
        next `judge` compares the two runs (docs/judge.md, "The gaps between calls"). One per
        mark. Returns the id of the probe run's first request."""
        doc = self._request("POST", "/sim/probe", 10)
        self._probing = True
        return int(doc["probe"])

    @property
    def probing(self) -> bool:
        """Whether a probe run was asked for since the mark."""
        return getattr(self, "_probing", False)

    def confirm(self, run: Optional[str] = None) -> int:
        """After the probe run, where the report asks for it (`Report.confirm`), the program
        is about to run a third time, repeating `run` (`plain` or `probe`; default: what the
        simulator's own report asks): the next `judge` judges both pairs of runs and keeps the
        verdict closer to parallel, since waits that do not recur are not the program's
        (docs/judge.md, "A confirmation run"). One per probe run. Returns the id of the
        confirmation's first request."""
        path = "/sim/confirm" + (f"?run={urllib.parse.quote(run)}" if run else "")
        doc = self._request("POST", path, 10)
        self._confirming = True
        return int(doc["confirm"])

    @property
    def confirming(self) -> bool:
        """Whether a confirmation run was asked for since the mark."""
        return getattr(self, "_confirming", False)

    def judge_program(self, program: Callable[[], Any], **options: Any) -> Judgement:
        """Run `program` (a function; a coroutine function runs under `asyncio.run`), judge
        it, and where the gaps between its agents' calls decide the verdict run it once more
        as a probe run and judge both; where the verdict then rests on waits the probe found
        and does not pass, run it a third time to confirm them. `options` are `judge`'s.
        `program` must make the same calls each time. Where the verdict may be the machine's
        (`Report.needs_rerun`: the simulator itself late, a stall reading the last answer),
        the whole is done once more in a new window, whose verdict stands."""
        j = self._judge_program_once(program, **options)
        if j.report.needs_rerun:
            j = self._judge_program_once(program, **options)
        longer = self._longer(j)
        if longer is None:
            return j
        # Inconclusive for the time scale: the whole again at the longer one it names. A
        # parallel verdict there stands; any other keeps this one: the time lost there is the
        # program's own delays, which no agent waited on another for (a probe run showed it).
        self.rescale(longer)
        again = self._judge_program_once(program, **options)
        return again if again.verdict == "parallel" else j

    def _judge_program_once(self, program: Callable[[], Any], **options: Any) -> Judgement:
        self.mark()
        _call(program)
        j = self.judge(**options)
        if not j.report.needs_probe:
            return j
        self.probe()
        try:
            _call(program)
        except Exception as e:
            if hasattr(e, "add_note"):  # Python 3.11+
                e.add_note(PROBE_FAILED)
            raise
        j = self.judge(**options)
        if not j.report.needs_confirmation or j.passed and j.expectations:
            return j
        self.confirm(j.report.confirm)
        _call(program)
        return self.judge(**options)

    def judge(
        self,
        *,
        agents: Optional[int] = None,
        since: Optional[int] = None,
        expect: Optional[str] = None,
        min_saving: Optional[float] = None,
        min_speedup: Optional[float] = None,
        wait_ms: Optional[int] = None,
    ) -> Judgement:
        """The judge's verdicts on the requests since the last mark (after waiting up to
        `wait_ms`, default 2000, for requests in flight). `agents`: how many agents should
        run at once when their requests carry no X-Agent label. `expect`, `min_saving`,
        `min_speedup`: expectations; the answer's `passed` says whether they held."""
        params = {
            "agents": agents,
            "since": since,
            "expect": expect,
            "min_saving": min_saving,
            "min_speedup": min_speedup,
            "wait_ms": wait_ms,
        }
        query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        timeout = (wait_ms if wait_ms is not None else 2000) / 1000 + 30
        doc = self._request("GET", "/sim/judge" + (f"?{query}" if query else ""), timeout)
        return Judgement.from_json(doc)

    def assert_judged(self, expect: str = "parallel", **options: Any) -> Judgement:
        """Ask the judge with `expect` (and any of `judge`'s options); raise `JudgeFailure`
        (an AssertionError whose message is the report in words) unless every expectation
        held."""
        __tracebackhide__ = True  # pytest shows the test's line, not this module's
        j = self.judge(expect=expect, **options)
        if not j.passed:
            if j.report.needs_rerun and not self.rerunning:
                raise RerunNeeded(
                    j, f"the agents were not judged {expect.replace('_', ' ')} (maybe the machine's doing: run again)"
                )
            if j.report.needs_probe and not self.probing:
                raise ProbeNeeded(j, f"the agents were not judged {expect.replace('_', ' ')} (a probe run would settle it)")
            longer = self._longer(j)
            if longer is not None:
                raise RescaleNeeded(
                    j,
                    f"the agents were not judged {expect.replace('_', ' ')} at time scale {self.time_scale} "
                    f"(judge it again at {longer})",
                )
            if j.report.needs_confirmation and self.probing and not self.confirming:
                raise ConfirmationNeeded(
                    j, f"the agents were not judged {expect.replace('_', ' ')} (one more run would confirm it)"
                )
            raise JudgeFailure(j, f"the agents were not judged {expect.replace('_', ' ')}")
        return j

    def assert_parallel(
        self,
        *,
        agents: Optional[int] = None,
        min_saving: Optional[float] = None,
        min_speedup: Optional[float] = None,
    ) -> Judgement:
        """Fail unless the client verdict is `parallel` (an inconclusive run never is)."""
        __tracebackhide__ = True
        return self.assert_judged(
            "parallel", agents=agents, min_saving=min_saving, min_speedup=min_speedup
        )

    async def ajudge(self, **options: Any) -> Judgement:
        """`judge` without blocking the event loop (for async tests)."""
        return await asyncio.get_running_loop().run_in_executor(None, lambda: self.judge(**options))

    async def aassert_parallel(self, **options: Any) -> Judgement:
        """`assert_parallel` without blocking the event loop (for async tests)."""
        return await asyncio.get_running_loop().run_in_executor(
            None, lambda: self.assert_parallel(**options)
        )

    def __repr__(self) -> str:
        state = self.urls[0] if self.urls and self._proc else "stopped"
        return f"Simulator({state})"



def _call(program: Callable[[], Any]) -> None:
    """Runs a program: a function, or a coroutine function under its own event loop."""
    result = program()
    if asyncio.iscoroutine(result):
        asyncio.run(result)
