"""Verification: does a running stack answer each workload correctly?

- :mod:`pywebbench.verify.check`: :func:`verify` one workload of a running server
  (a :class:`VerifyReport`).
- :mod:`pywebbench.verify.rules`: the TechEmpower-style rules, one per workload.
- :mod:`pywebbench.verify.user_app`: :func:`check_path`, one path of a user's own app.
- :mod:`pywebbench.verify.httpclient`: the small keep-alive HTTP/1.1 client they share.
"""

from pywebbench.verify.check import VerifyReport, verify

__all__ = ["VerifyReport", "verify"]
