# SPDX-License-Identifier: MIT
"""A minimal OpenEnv WebSocket client (what an OpenEnv EnvClient sends)."""
import base64
import io
import json
import os
import shlex
import tarfile
import tomllib

import websockets


async def call(ws, msg):
    await ws.send(json.dumps(msg))
    return json.loads(await ws.recv())


async def reset(ws, task):
    return await call(ws, {"type": "reset", "data": {"task_id": task}})


async def exec_(ws, command, **kw):
    return await call(ws, {"type": "step", "data": {"action_type": "exec", "command": command, **kw}})


async def evaluate(ws):
    return await call(ws, {"type": "step", "data": {"action_type": "evaluate"}})


def connect(url, **kw):
    kw.setdefault("max_size", 32 << 20)
    kw.setdefault("ping_interval", 20)
    kw.setdefault("ping_timeout", 20)
    kw.setdefault("open_timeout", 30)
    return websockets.connect(url, **kw)


def oracle_commands(task_dir):
    """The oracle's moves as exec steps: upload solution/ (a base64 tar in
    64 KiB pieces), then run solve.sh as Harbor's oracle does."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(os.path.join(task_dir, "solution"), arcname=".")
    b64 = base64.b64encode(buf.getvalue()).decode()
    cmds = ["rm -f /tmp/.solution.b64 && mkdir -p /solution"]
    for i in range(0, len(b64), 65536):
        cmds.append("printf %%s '%s' >> /tmp/.solution.b64" % b64[i:i + 65536])
    cmds.append("base64 -d /tmp/.solution.b64 | tar -xz -C /solution && rm /tmp/.solution.b64 "
                "&& chmod +x /solution/solve.sh")
    with open(os.path.join(task_dir, "task.toml"), "rb") as f:
        env = tomllib.load(f).get("solution", {}).get("env", {})
    assigns = " ".join("%s=%s" % (k, shlex.quote(os.path.expandvars(str(v)))) for k, v in env.items())
    cmds.append("env DEBIAN_FRONTEND=noninteractive %s /solution/solve.sh" % assigns)
    return cmds
