"""Start an ASGI app on daphne (Twisted). daphne has no worker processes of its own: the
launcher binds the socket and forks ``--workers`` daphne processes on it (``daphne --fd``)."""

from launch_common import bind_socket, parse_args, serve_workers


def main():
    args = parse_args("daphne launcher")
    sock = bind_socket(args.host, args.port, args.backlog)
    argv = ["--fd", str(sock.fileno()), "-v", "0", args.app]

    def serve():
        # Imported after the fork: daphne installs Twisted's asyncio reactor (and creates its
        # event loop) at import time, which must not be shared between processes.
        from daphne.cli import CommandLineInterface

        CommandLineInterface().run(argv)

    serve_workers(args.workers, serve)


if __name__ == "__main__":
    main()
