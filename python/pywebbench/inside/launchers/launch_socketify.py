"""Start a WSGI or ASGI app on socketify (uWebSockets, C; the app runs on its loop thread).

Pitfall handled: ``listen(port)`` binds 0.0.0.0; we pass AppListenOptions with the host.
Workers are socketify's own forks (``run(workers=N)``), each listening with SO_REUSEPORT.
Pitfall handled: socketify sometimes fails to bind ("Failed to listen on port N") and then
runs without a socket; the launcher exits with status 3 instead.
"""

import os
import threading

from socketify import ASGI, WSGI, AppListenOptions

from launch_common import keep_socketify_listen_host, load_app, parse_args

LISTEN_TIMEOUT_S = 15


def main():
    args = parse_args("socketify launcher", options={"--interface": str})
    app = load_app(args.app)
    server_cls = {"wsgi": WSGI, "asgi": ASGI}[args.interface]

    listening = threading.Event()

    def on_listen(config):
        listening.set()

    def watchdog():
        # When the bind fails, socketify raises inside its own listen callback (the error is
        # printed and ignored by cffi) and keeps running without a socket: exit instead, so
        # the launch fails at once and can be retried on another port.
        if not listening.wait(LISTEN_TIMEOUT_S):
            print(
                "socketify: failed to listen on %s:%s within %d s"
                % (args.host, args.port, LISTEN_TIMEOUT_S),
                flush=True,
            )
            os._exit(3)

    threading.Thread(target=watchdog, daemon=True).start()

    keep_socketify_listen_host()
    server = server_cls(app)
    server.listen(AppListenOptions(port=args.port, host=args.host), on_listen)
    server.run(workers=args.workers)


if __name__ == "__main__":
    main()
