"""Environments written for OpenEnv (Meta / Hugging Face; `pip install 'rlvr[openenv]'`, package openenv-core) played
through rlvr: `env: {name: openenv, args: {environment: my_module:MyEnvironment}}`.

An OpenEnv environment is an `openenv.core.env_server.Environment` subclass whose `reset(seed, ...)` and
`step(action)` return Observation models (pydantic) carrying `reward` and `done`; its actions are an `Action` model.
rlvr talks to one of three places, chosen by the arguments:

- `mode: in_process` (default with `environment`): the class is instantiated per episode in this process;
- `mode: served`: rlvr serves the class on 127.0.0.1 with OpenEnv's own app factory (`create_app`, uvicorn in a
  thread, one WebSocket session per episode) and plays it through OpenEnv's client (`GenericEnvClient`);
- `base_url: http://host:port`: a server someone else started; its action schema comes from its `/schema`.

Both served kinds speak OpenEnv's client protocol (reset / step over its WebSocket), one client and session per
episode, all clients on one event loop in a background thread. The assistant turn becomes an action by the action
schema (`ActionSchema`): a JSON object in the reply, or, for an action of one field, the reply's plain text (a
number field takes the first number in it); a reply that does not parse, or that the environment's validation
rejects, is answered with the invalid-action message and counted (`invalid_actions`), without a step. Observations
are rendered as the next user message; the reward and `done` are the environment's. A server that dies or hangs
mid-episode fails that episode after `step_timeout_s` (reward 0, counted as `env_failed`, logged), and the rollout
goes on; `max_consecutive_failures` failed episodes in a row stop the run, so a dead server is never a quiet zero.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import json
import logging
import re
import socket
import threading
import time
import zlib
from collections.abc import Coroutine
from typing import Any, Literal

from rlvr.envs.base import ENVIRONMENTS, Environment, EnvStep, Message, Outcome
from rlvr.errors import ConfigError, RlvrError
from rlvr.tasks.base import Problem, Task
from rlvr.watchdog import WATCH

log = logging.getLogger(__name__)

NUMBER = {"integer": re.compile(r"-?\d+"), "number": re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")}
BOOLEAN = {"true": True, "yes": True, "false": False, "no": False}
INVALID_ACTION = "Invalid action ({error}). Reply with {expected}."


def needs_openenv() -> None:
    try:
        import openenv.core  # noqa: F401
    except ImportError:
        raise ConfigError("Environment 'openenv' needs OpenEnv: pip install 'rlvr[openenv]' (or openenv-core).") \
            from None


def import_object(spec: str, what: str) -> Any:
    """'package.module:Name' -> the object, or a ConfigError naming `what` (the argument it came from)."""
    module_name, _, name = spec.partition(":")
    if not name:
        raise ConfigError(f"{what} must be 'package.module:Name', got {spec!r}.")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ConfigError(f"Cannot import module '{module_name}' for {what} ({spec!r}): {e}") from None
    if not hasattr(module, name):
        raise ConfigError(f"Module '{module_name}' has no '{name}' ({what}).")
    return getattr(module, name)


# ------------------------------------------------------------------------------------------------ the action schema

class InvalidAction(ValueError):
    """The reply is not an action of the environment's schema."""


class ActionSchema:
    """An OpenEnv action schema (the JSON schema of its Action model), and how a reply becomes an action: the first
    JSON object in it, or for an action of one field its plain text (a string field: the text; a number field: its
    first number; a boolean: true/false/yes/no). `model` (the Action class, when rlvr has it) validates the action
    as the environment would; without it the server validates."""

    def __init__(self, schema: dict[str, Any], model: type | None = None):
        self.schema, self.model = schema, model
        self.fields = {k: v for k, v in schema.get("properties", {}).items() if k != "metadata"}
        self.required = [k for k in schema.get("required", []) if k != "metadata"]
        self.closed = schema.get("additionalProperties", True) is False
        if not self.fields:
            raise ConfigError(f"The action schema {schema.get('title', '')!r} has no fields (besides metadata); rlvr "
                              "parses a reply into an action's fields.")

    @classmethod
    def of_model(cls, model: type) -> ActionSchema:
        """The schema of an OpenEnv Action class; a field without a JSON form (a tensor, an arbitrary object) is a
        ConfigError naming it, since a reply cannot be parsed into it."""
        from pydantic import TypeAdapter

        for name, info in model.model_fields.items():
            try:
                TypeAdapter(info.annotation).json_schema()
            except Exception as e:
                raise ConfigError(f"Action {model.__name__} field '{name}' ({info.annotation!r}) has no JSON form "
                                  f"({type(e).__name__}), so rlvr cannot parse a reply into it; give the field a "
                                  "JSON type (str, int, float, bool, list, dict, a nested model).") from None
        return cls(model.model_json_schema(), model)

    @property
    def expected(self) -> str:
        """What a reply should hold, in words."""
        example = json.dumps({k: f"<{v.get('type', 'value')}>" for k, v in self.fields.items()})
        if len(self.fields) == 1:
            (name, spec), = self.fields.items()
            return f"the {name} ({spec.get('type', 'value')}) or a JSON object {example}"
        return f"a JSON object {example}"

    def parse(self, text: str) -> dict[str, Any]:
        """The action (a dict of its fields) a reply holds; InvalidAction when it holds none."""
        found = first_json_object(text)
        if found is None:
            if len(self.fields) != 1:
                raise InvalidAction("no JSON object in the reply")
            (name, spec), = self.fields.items()
            found = {name: plain_value(text, spec.get("type"))}
        missing = [k for k in self.required if k not in found]
        unknown = [k for k in found if k not in self.fields and k != "metadata"] if self.closed else []
        if missing or unknown:
            raise InvalidAction(", ".join([f"missing {k}" for k in missing] + [f"unknown field {k}" for k in unknown]))
        if self.model is not None:
            from pydantic import ValidationError

            try:
                return self.model.model_validate(found).model_dump(exclude={"metadata"})
            except ValidationError as e:
                raise InvalidAction("; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors()))\
                    from None
        return found


def first_json_object(text: str) -> dict | None:
    """The first JSON object in `text` (fenced or inline), or None."""
    decoder = json.JSONDecoder()
    for at in (m.start() for m in re.finditer(r"\{", text)):
        try:
            value, _ = decoder.raw_decode(text, at)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def plain_value(text: str, kind: str | None) -> Any:
    """A single field's value from a plain-text reply, by its JSON type."""
    if kind in NUMBER:
        found = NUMBER[kind].search(text)
        if found is None:
            raise InvalidAction(f"no {kind} in the reply")
        return int(found.group()) if kind == "integer" else float(found.group())
    if kind == "boolean":
        word = text.strip().lower().rstrip(".!")
        if word not in BOOLEAN:
            raise InvalidAction("the reply is not true/false")
        return BOOLEAN[word]
    if kind in (None, "string"):
        return text.strip()
    raise InvalidAction(f"a {kind} needs a JSON object")


def observation_text(observation: dict[str, Any], field: str | None) -> str:
    """An observation (its fields without reward, done and metadata) as a message's text: the named field, the only
    field, or all fields as a JSON object."""
    if field is not None:
        if field not in observation:
            raise RlvrError(f"The observation has no field '{field}' (data.tasks[].env.args.observation_field); its "
                            f"fields: {', '.join(observation) or 'none'}.")
        value = observation[field]
    elif len(observation) == 1:
        (value,) = observation.values()
    else:
        return json.dumps(observation, ensure_ascii=False)
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


# ------------------------------------------------------------------------------------------- where episodes are played

class EnvironmentFailed(RuntimeError):
    """The environment (its server) did not answer: down, dead or too slow."""


class ServerRejected(RuntimeError):
    """The server answered with an error message (its `code`: VALIDATION_ERROR for a rejected action)."""

    def __init__(self, message: str, code: str):
        super().__init__(message)
        self.code = code


class InProcessSession:
    """One episode's environment instance in this process; answers as the server would (OpenEnv's serializer)."""

    def __init__(self, factory: Any, action_model: type):
        self.env, self.action_model = factory(), action_model

    def reset(self, **kwargs: Any) -> dict[str, Any]:
        import inspect

        from openenv.core.env_server import serialize_observation

        params = inspect.signature(self.env.reset).parameters
        takes_any = any(p.kind == p.VAR_KEYWORD for p in params.values())
        return serialize_observation(self.env.reset(**{k: v for k, v in kwargs.items() if takes_any or k in params}))

    def step(self, action: dict[str, Any]) -> dict[str, Any]:
        from openenv.core.env_server import serialize_observation

        try:
            observation = self.env.step(self.action_model.model_validate(action))
        except Exception as e:
            raise EnvironmentFailed(f"{type(e).__name__}: {e}") from e
        return serialize_observation(observation)

    def close(self) -> None:
        self.env.close()


class EventLoop:
    """The one asyncio loop (a daemon thread) every OpenEnv client of this process runs on."""

    _loop: asyncio.AbstractEventLoop | None = None
    _lock = threading.Lock()

    @classmethod
    def run(cls, coro: Coroutine, timeout: float) -> Any:
        with cls._lock:
            if cls._loop is None:
                cls._loop = asyncio.new_event_loop()
                threading.Thread(target=cls._loop.run_forever, name="rlvr-openenv-clients", daemon=True).start()
        future = asyncio.run_coroutine_threadsafe(coro, cls._loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise


class ClientSession:
    """One episode's session on an OpenEnv server, through OpenEnv's own client (its WebSocket protocol)."""

    def __init__(self, base_url: str, timeout_s: float):
        from openenv.core import GenericEnvClient

        self.url, self.timeout_s, self.broken = base_url, timeout_s, False
        self.client = GenericEnvClient(base_url=base_url, connect_timeout_s=timeout_s, message_timeout_s=timeout_s)

    def _call(self, coro: Coroutine, what: str) -> dict[str, Any]:
        with WATCH.waiting(f"the OpenEnv server at {self.url} ({what})"):
            try:
                result = EventLoop.run(coro, self.timeout_s * 2 + 5)
            except RuntimeError as e:
                if (code := re.search(r"\(code: (\w+)\)$", str(e))) is not None:
                    raise ServerRejected(str(e), code.group(1)) from e
                self.broken = True
                raise EnvironmentFailed(f"{what}: {e}") from e
            except (TimeoutError, asyncio.TimeoutError):
                self.broken = True
                raise EnvironmentFailed(f"{what}: no answer within {self.timeout_s:g} s (step_timeout_s)") from None
            except Exception as e:  # the connection closed or refused
                self.broken = True
                raise EnvironmentFailed(f"{what}: {type(e).__name__}: {e}") from e
        return {"observation": result.observation, "reward": result.reward, "done": result.done}

    def reset(self, **kwargs: Any) -> dict[str, Any]:
        return self._call(self.client.reset(**kwargs), "reset")

    def step(self, action: dict[str, Any]) -> dict[str, Any]:
        return self._call(self.client.step(action), "step")

    def close(self) -> None:
        try:
            EventLoop.run(self._close(), 10.0)
        except Exception as e:  # a dead server: nothing left to close
            log.debug("closing an OpenEnv session at %s: %s", self.url, e)

    async def _close(self) -> None:
        """Ask the server to end the session and let it close the connection first (OpenEnv's `disconnect` closes
        from this side at once, and the server then logs a traceback while closing an already closed socket)."""
        ws = self.client._ws
        if ws is None or self.broken:  # a session that hung or broke is dropped, not asked
            await self.client.disconnect()
            return
        try:
            await ws.send(json.dumps({"type": "close"}))
            await asyncio.wait_for(ws.wait_closed(), 5.0)
        finally:
            await self.client.disconnect()


def check_server(base_url: str, timeout_s: float) -> dict[str, Any]:
    """The action schema of the OpenEnv server at `base_url`; a ConfigError naming the URL when it does not answer."""
    import httpx

    try:
        with WATCH.waiting(f"the OpenEnv server at {base_url} (its /schema)"):
            answer = httpx.get(f"{base_url.rstrip('/')}/schema", timeout=timeout_s)
        answer.raise_for_status()
        return answer.json()["action"]
    except Exception as e:
        raise ConfigError(
            f"No OpenEnv server answers at {base_url} ({type(e).__name__}: {e}). Start it first, e.g. "
            "`uvicorn my_module:app --host 127.0.0.1 --port 8000` where app = openenv.core.env_server.create_app("
            "MyEnvironment, MyAction, MyObservation, max_concurrent_envs=256), or let rlvr run the environment: "
            "data.tasks[].env.args.environment: my_module:MyEnvironment (mode in_process or served).") from None


class Server:
    """An OpenEnv environment class served on 127.0.0.1 by OpenEnv's `create_app` (uvicorn in a daemon thread), one
    per (class, arguments, port) in this process."""

    _running: dict[tuple, Server] = {}

    def __init__(self, factory: Any, env_class: type, action_model: type, observation_model: type, port: int,
                 max_sessions: int):
        import uvicorn
        from openenv.core.env_server import ConcurrencyConfigurationError, create_app

        try:
            app = create_app(factory, action_model, observation_model, max_concurrent_envs=max_sessions)
        except ConcurrencyConfigurationError:
            raise ConfigError(f"OpenEnv environment {env_class.__name__} does not declare SUPPORTS_CONCURRENT_SESSIONS "
                              "= True, so its server holds one session at a time, but mode 'served' opens one per "
                              "episode. Declare it (if its instances share no state), or use mode: in_process.") \
                from None
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as e:
            sock.close()
            raise ConfigError(f"Cannot serve the OpenEnv environment {env_class.__name__} on 127.0.0.1:{port}: "
                              f"{e.strerror or e}. Another process holds the port; set data.tasks[].env.args.port to "
                              "a free port, or 0 to let rlvr pick one.") from None
        self.port = sock.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", ws_ping_interval=None))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, name=f"openenv-{self.port}",
                                       daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        with WATCH.waiting(f"the OpenEnv server of {env_class.__name__} starting on {self.base_url}"):
            while not self.server.started:
                if time.monotonic() > deadline:
                    raise RlvrError(f"The OpenEnv server of {env_class.__name__} did not start on {self.base_url} "
                                    "within 30 s.")
                time.sleep(0.01)

    @classmethod
    def of(cls, key: tuple, *args: Any) -> Server:
        if key not in cls._running:
            cls._running[key] = cls(*args)
        return cls._running[key]


class Failures:
    """Failed episodes in this process: logged with their count; `limit` in a row (no step answered between them)
    stop the run."""

    total = in_a_row = 0

    @classmethod
    def record(cls, failed: str | None, limit: int, where: str) -> None:
        if failed is None:
            cls.in_a_row = 0
            return
        cls.total += 1
        cls.in_a_row += 1
        log.warning("OpenEnv episode failed (%d so far, %d in a row): %s", cls.total, cls.in_a_row, failed)
        if cls.in_a_row >= limit:
            raise RlvrError(f"{cls.in_a_row} OpenEnv episodes in a row failed ({where}); the last: {failed}. Is the "
                            "environment server up? (data.tasks[].env.args.max_consecutive_failures sets the limit.)")


# ------------------------------------------------------------------------------------------------ the environment

@ENVIRONMENTS.register("openenv")
class OpenEnvEnvironment(Environment):
    """An OpenEnv environment (pip install 'rlvr[openenv]') in process, served on 127.0.0.1 by OpenEnv's app factory,
    or at a base URL: each reply parsed into its Action, each observation the next message (docs/environments.md).

    Args: environment ('module:Class', an openenv Environment subclass) or base_url (a running server); mode
    (in_process | served, with environment); env_args (the class's constructor arguments); action / observation
    ('module:Class', default: the class's generic parameters); port (served: 0 picks a free one); max_sessions
    (served: sessions at once); reset_fields (reset argument -> problem field, e.g. {secret: answer}; reset also gets
    `seed`: the problem's `seed` field or a hash of its uid); opening (observation: the reset observation opens the
    episode; prompt: the problem's prompt does); observation_field (the field shown; default the only one, else all
    as JSON); observation_role; invalid_action (the reply to an unparsable action; {error} and {expected} are filled
    in); outcome (last | sum of the step rewards); success_at (success when the outcome reaches it); step_timeout_s;
    max_consecutive_failures."""

    def __init__(self, problem: Problem, task: Task, environment: str | None = None, base_url: str | None = None,
                 mode: Literal["in_process", "served"] = "in_process", env_args: dict[str, Any] | None = None,
                 action: str | None = None, observation: str | None = None, port: int = 0, max_sessions: int = 256,
                 reset_fields: dict[str, str] | None = None, opening: Literal["observation", "prompt"] = "observation",
                 observation_field: str | None = None, observation_role: str = "user",
                 invalid_action: str = INVALID_ACTION, outcome: Literal["last", "sum"] = "last",
                 success_at: float = 1.0, step_timeout_s: float = 30.0, max_consecutive_failures: int = 16):
        super().__init__(problem, task)
        needs_openenv()
        if (environment is None) == (base_url is None):
            raise ConfigError("Environment 'openenv' needs exactly one of data.tasks[].env.args.environment "
                              "('module:Class', run by rlvr) and base_url (a running OpenEnv server).")
        if mode not in ("in_process", "served") or opening not in ("observation", "prompt") or \
                outcome not in ("last", "sum"):
            raise ConfigError(f"openenv args: mode must be in_process or served (got {mode!r}), opening observation "
                              f"or prompt (got {opening!r}), outcome last or sum (got {outcome!r}).")
        missing = [f for f in (reset_fields or {}).values() if f != "answer" and f not in problem.fields]
        if missing:
            raise ConfigError(f"openenv reset_fields name problem fields {missing} that task {task.label}'s problems "
                              f"lack; they have: answer, {', '.join(problem.fields) or '(no other)'}.")
        self.session, self.schema = open_session(environment, base_url, mode, env_args or {}, action, observation,
                                                 port, max_sessions, step_timeout_s)
        self.reset_fields, self.opening = reset_fields or {}, opening
        self.observation_field, self.observation_role = observation_field, observation_role
        self.invalid_action, self.outcome_rule, self.success_at = invalid_action, outcome, success_at
        self.max_failures, self.where = max_consecutive_failures, base_url or environment
        self.rewards: list[float] = []
        self.invalid = 0
        self.failed: str | None = None

    def reset_kwargs(self) -> dict[str, Any]:
        """`seed` (the problem's own, or a stable hash of its uid) and the problem fields named in reset_fields."""
        fields = self.problem.reward_fields()
        seed = fields.get("seed", zlib.crc32(self.problem.uid.encode()) & 0x7FFFFFFF)
        return {"seed": seed, **{arg: fields[name] for arg, name in self.reset_fields.items()}}

    def reset(self) -> list[Message]:
        try:
            answer = self.session.reset(**self.reset_kwargs())
        except (EnvironmentFailed, ServerRejected) as e:
            raise RlvrError(f"The OpenEnv environment at {self.where} failed to reset an episode of problem "
                            f"{self.problem.uid}: {e}") from None
        if self.opening == "prompt":
            return super().reset()
        return [{"role": "user", "content": observation_text(answer["observation"], self.observation_field)}]

    def step(self, text: str) -> EnvStep:
        try:
            action = self.schema.parse(text)
            answer = self.session.step(action)
        except InvalidAction as e:
            return self._invalid(str(e))
        except ServerRejected as e:
            if e.code == "VALIDATION_ERROR":
                return self._invalid(str(e))
            return self._fail(str(e))
        except EnvironmentFailed as e:
            return self._fail(str(e))
        Failures.record(None, self.max_failures, self.where)  # the environment answered
        self.rewards.append(float(answer["reward"] or 0.0))
        message = {"role": self.observation_role,
                   "content": observation_text(answer["observation"], self.observation_field)}
        return EnvStep([message], self.rewards[-1], bool(answer["done"]))

    def _invalid(self, error: str) -> EnvStep:
        self.invalid += 1
        reply = self.invalid_action.format(error=error, expected=self.schema.expected)
        return EnvStep([{"role": self.observation_role, "content": reply}])

    def _fail(self, error: str) -> EnvStep:
        self.failed = error
        Failures.record(error, self.max_failures, self.where)
        return EnvStep(done=True)

    def outcome(self) -> Outcome:
        if self.failed is not None or not self.rewards:
            return Outcome(0.0, False)
        value = self.rewards[-1] if self.outcome_rule == "last" else sum(self.rewards)
        return Outcome(value, value >= self.success_at)

    def metrics(self) -> dict[str, float]:
        return {"invalid_actions": float(self.invalid), "env_failed": float(self.failed is not None)}

    def close(self) -> None:
        self.session.close()


def open_session(environment: str | None, base_url: str | None, mode: str, env_args: dict[str, Any],
                 action: str | None, observation: str | None, port: int, max_sessions: int, timeout_s: float
                 ) -> tuple[InProcessSession | ClientSession, ActionSchema]:
    """One episode's session and the action schema, where the arguments say the environment runs."""
    if base_url is not None:
        model = import_object(action, "data.tasks[].env.args.action") if action else None
        return ClientSession(base_url, timeout_s), \
            (ActionSchema.of_model(model) if model else server_schema(base_url, timeout_s))
    env_class, action_model, observation_model = environment_types(environment, action, observation)
    schema = ActionSchema.of_model(action_model)
    factory = functools.partial(env_class, **env_args) if env_args else env_class
    if mode == "in_process":
        try:
            return InProcessSession(factory, action_model), schema
        except TypeError as e:
            raise ConfigError(f"Bad arguments for OpenEnv environment {environment} "
                              f"(data.tasks[].env.args.env_args): {e}") from None
    key = (environment, json.dumps(env_args, sort_keys=True), port)
    served = Server.of(key, factory, env_class, action_model, observation_model, port, max_sessions)
    return ClientSession(served.base_url, timeout_s), schema


@functools.cache
def server_schema(base_url: str, timeout_s: float) -> ActionSchema:
    """The action schema a server publishes (checked once per URL: a server down at start is named here)."""
    return ActionSchema(check_server(base_url, timeout_s))


@functools.cache
def environment_types(environment: str, action: str | None, observation: str | None) -> tuple[type, type, type]:
    """The environment class and its Action and Observation models: named, or its generic parameters
    (`class MyEnv(Environment[MyAction, MyObservation, State])`)."""
    from typing import get_args

    from openenv.core.env_server import Action, Observation
    from openenv.core.env_server import Environment as OpenEnvBase

    env_class = import_object(environment, "data.tasks[].env.args.environment")
    if not (isinstance(env_class, type) and issubclass(env_class, OpenEnvBase)):
        raise ConfigError(f"{environment} is not an OpenEnv Environment subclass (openenv.core.env_server"
                          ".Environment).")
    params = next((get_args(b) for c in env_class.__mro__ for b in getattr(c, "__orig_bases__", ())
                   if getattr(b, "__origin__", None) is OpenEnvBase and get_args(b)), ())
    declared = {"action": params[0] if params else None, "observation": params[1] if len(params) > 1 else None}
    models = []
    for what, spec, base in (("action", action, Action), ("observation", observation, Observation)):
        model = import_object(spec, f"data.tasks[].env.args.{what}") if spec else declared[what]
        if not (isinstance(model, type) and issubclass(model, base)) or model is base:
            raise ConfigError(f"{environment} names no {base.__name__} subclass as its {what} type; declare it "
                              f"(class {env_class.__name__}(Environment[MyAction, MyObservation, State])) or set "
                              f"data.tasks[].env.args.{what}: module:Class.")
        models.append(model)
    return env_class, models[0], models[1]

