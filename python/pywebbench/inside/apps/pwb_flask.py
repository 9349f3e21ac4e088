"""pywebbench workloads in Flask (WSGI): ``pwb_flask:app``. Runs inside a stack venv."""

from flask import Flask, Response, jsonify, request

import pwb_common as c

app = Flask(__name__)


@app.errorhandler(c.BadParameter)
def _bad_parameter(exc):
    return Response(str(exc), status=400, content_type=c.TEXT)


@app.errorhandler(c.ServiceNotConfigured)
def _no_service(exc):
    return Response(str(exc), status=503, content_type=c.TEXT)


@app.route("/hello")
def hello():
    return Response(c.HELLO, content_type=c.TEXT)


@app.route("/json")
def json_():
    return jsonify(c.MESSAGE)


@app.route("/cpu")
def cpu():
    return Response(c.cpu_body(c.cpu_n(request.args.get("n"))), content_type=c.TEXT)


@app.route("/environ")
def environ():
    return Response(c.render_environ("WSGI environ", request.environ), content_type=c.HTML)


@app.route("/redis")
def redis_():
    return Response(c.redis_page(), content_type=c.HTML)


@app.route("/fortunes")
def fortunes():
    return Response(c.fortunes_page(), content_type=c.HTML)


@app.route("/io")
def io():
    ms = c.io_ms(request.args.get("ms"))
    c.io_sleep(ms)
    return Response(c.io_body(ms), content_type=c.TEXT)


@app.route("/upload", methods=["POST"])
def upload():
    return jsonify(c.upload_result(request.get_data()))


application = app
