"""Launch: start one stack's server as a pinned process group, wait until it answers, stop it.

>>> with start_server(stack, env, cpus=[0], log_dir=Path("logs")) as srv:  # doctest: +SKIP
...     print(srv.base_url, srv.cold_start_s, srv.settings)

- :mod:`pywebbench.launch.server`: :func:`start_server`, :class:`RunningServer`,
  :class:`LaunchError`, :func:`free_port`, :func:`launch_env`.
- :mod:`pywebbench.launch.process`: :class:`ProcessGroup`, the one way pywebbench runs a
  child process (own session, pinned, logging to a file, stopped as a group, never orphaned).
- :mod:`pywebbench.launch.watchdog`: the process that stops a group whose starter died.
"""

from pywebbench.launch.process import ProcessGroup, group_members, tail
from pywebbench.launch.server import (
    EnvLike,
    LaunchError,
    RunningServer,
    default_app_dir,
    free_port,
    launch_env,
    start_server,
)

__all__ = [
    "EnvLike",
    "LaunchError",
    "ProcessGroup",
    "RunningServer",
    "default_app_dir",
    "free_port",
    "group_members",
    "launch_env",
    "start_server",
    "tail",
]
