"""Control characters in logged data never start a line of their own."""

from __future__ import annotations

import io
import logging

from adapters.observability.logs import EscapeControlCharacters, install


def logged(*args: object, exc: BaseException | None = None) -> str:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger(f"test-escaping-{id(stream)}")
    logger.propagate = False
    logger.addHandler(handler)
    install(logger)
    if exc is None:
        logger.warning(*args)
    else:
        try:
            raise exc
        except type(exc):
            logger.exception(*args)
    return stream.getvalue()


def test_cr_lf_in_logged_data_is_escaped_and_forges_no_line() -> None:
    output = logged("billing account %s created", "Acme\r\n[2026-11-22 INFO] FORGED")

    assert output.count("\n") == 1
    assert "Acme\\r\\n[2026-11-22 INFO] FORGED" in output


def test_every_c0_control_and_del_is_escaped() -> None:
    output = logged("%s", "".join(map(chr, [*range(0x20), 0x7F])))

    assert output.count("\n") == 1
    assert "\\x00" in output
    assert "\\x1b" in output
    assert "\\x7f" in output


def test_a_traceback_keeps_its_lines_but_not_the_controls_in_its_message() -> None:
    output = logged("failed", exc=ValueError("bad\r\x1b[2Jname"))

    assert "Traceback (most recent call last):" in output
    assert "bad\\r\\x1b[2Jname" in output
    assert "\r" not in output
    assert "\x1b" not in output


def test_installing_twice_adds_one_filter() -> None:
    logger = logging.getLogger("test-escaping-twice")
    handler = logging.StreamHandler(io.StringIO())
    logger.addHandler(handler)
    install(logger)
    install(logger)

    assert sum(isinstance(f, EscapeControlCharacters) for f in handler.filters) == 1
