"""Start a WSGI or ASGI app on socketify (uWebSockets, C; the app runs on its loop thread).

Pitfall handled: ``listen(port)`` binds 0.0.0.0; we pass AppListenOptions with the host.
Workers are socketify's own forks (``run(workers=N)``), each listening with SO_REUSEPORT.
"""

import sys

from socketify import ASGI, WSGI, AppListenOptions

from launch_common import load_app, parse_args


def main():
    interface = "wsgi"
    argv = sys.argv[1:]
    if "--interface" in argv:
        i = argv.index("--interface")
        interface = argv[i + 1]
        del argv[i : i + 2]
    args = parse_args("socketify launcher (--interface wsgi|asgi)", argv)
    app = load_app(args.app)
    server_cls = {"wsgi": WSGI, "asgi": ASGI}[interface]

    def on_listen(config):
        if config is None or getattr(config, "port", 0) in (0, None):
            print("socketify: failed to listen on %s:%s" % (args.host, args.port), flush=True)
            sys.exit(3)

    server = server_cls(app)
    server.listen(AppListenOptions(port=args.port, host=args.host), on_listen)
    server.run(workers=args.workers)


if __name__ == "__main__":
    main()
