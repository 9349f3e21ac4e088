"""Start a WSGI app on bjoern (libev, C HTTP server; one thread per process).

bjoern has no threads and no access log; it sends no ``Server`` or ``Date`` header.
Workers share one socket bound here (bjoern's documented pre-fork pattern).
"""

import bjoern

from launch_common import bind_socket, load_app, parse_args, serve_workers


def main():
    args = parse_args("bjoern launcher")
    app = load_app(args.app)
    sock = bind_socket(args.host, args.port, args.backlog)
    serve_workers(args.workers, lambda: bjoern.server_run(sock, app))


if __name__ == "__main__":
    main()
