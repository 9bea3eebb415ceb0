#!/usr/bin/env python3
"""Tiny static HTTP server for live HLS tests.

usage: serve.py DOCROOT [PORTFILE]
Binds 127.0.0.1 on an OS-assigned port, prints the port on stdout (first line,
flushed) and, if PORTFILE is given, writes it there atomically.  Sends
Cache-Control: no-cache, quiet logging, exits on SIGTERM/SIGINT.
"""
import functools, http.server, os, signal, sys


class Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".m3u8": "application/vnd.apple.mpegurl",
        ".ts": "video/mp2t",
        ".m4s": "video/iso.segment",
        ".mp4": "video/mp4",
        ".key": "application/octet-stream",
    }

    def end_headers(self):
        self.send_header("Cache-Control", "no-cache")
        super().end_headers()

    def log_message(self, *a):
        if os.environ.get("SERVE_LOG"):
            super().log_message(*a)


def main():
    root = sys.argv[1]
    srv = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=root))
    srv.daemon_threads = True
    port = srv.server_address[1]
    if len(sys.argv) > 2:
        tmp = sys.argv[2] + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{port}\n")
        os.replace(tmp, sys.argv[2])
    print(port, flush=True)

    def stop(*_):
        # shutdown() must not run on the serving thread; just exit.
        os._exit(0)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    srv.serve_forever()


if __name__ == "__main__":
    main()
