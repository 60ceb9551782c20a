"""``savegame.redaction``: a URL's secrets removed wherever they are in it, and a
message's copies of them hidden (every command and page over such URLs:
tests/adversarial/test_url_secrets.py)."""

from __future__ import annotations

import pytest

from savegame.redaction import redact, redact_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://me:pw@h:5432/db?schema=s", "postgresql://me@h:5432/db?schema=s"),
        ("postgresql://me:p%zz@h/db", "postgresql://me@h/db"),
        ("postgresql://me:a@b@h/db", "postgresql://me@h/db"),  # libpq stops at the first @
        ("postgresql://h/db?password=pw&sslpassword=pw&sslkey=/k", "postgresql://h/db?sslkey=/k"),
        ("redis://:pw@h:6379/0?prefix=p", "redis://h:6379/0?prefix=p"),
        ("redis://h/0?prefix=p&password=pw", "redis://h/0?prefix=p"),
        (
            "sqlite:////tmp/s.db?objects=s3://b/p&endpoint=http://key:pw@h:9000",
            "sqlite:////tmp/s.db?objects=s3://b/p&endpoint=http://h:9000",
        ),
        (
            "sqlite:////tmp/s.db?objects=s3://b/p&endpoint=http%3A%2F%2Fkey%3Apw%40h",
            "sqlite:////tmp/s.db?objects=s3://b/p&endpoint=http://h",
        ),
        # An unencoded "/", "?" or "#" ends the host early for urllib, not for libpq:
        # nothing after the scheme can be told apart from the password.
        ("postgresql://me:p/w@h/db", "postgresql://(hidden: this URL does not parse)"),
        ("redis://:p#w@h/0", "redis://(hidden: this URL does not parse)"),
        ("redis://:p?w@h/0", "redis://(hidden: this URL does not parse)"),
        # Nothing to hide: left as it is.
        ("sqlite:////tmp/a@b.db", "sqlite:////tmp/a@b.db"),
        ("postgresql://h1:5432,h2:5433/db", "postgresql://h1:5432,h2:5433/db"),
        ("postgresql://[::1]:5432/db", "postgresql://[::1]:5432/db"),
        ("memory://shared", "memory://shared"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert redact_url(shown) == shown


def test_redact_hides_what_a_driver_quotes_but_not_the_user_name() -> None:
    url = "postgresql://postgres:postgres@h/db?password=Q%zz"
    said = (
        'invalid percent-encoded token: "Q%zz", for user "postgres" at postgresql://postgres@h/db'
    )
    assert redact(said, url) == (
        'invalid percent-encoded token: "***", for user "postgres" at postgresql://postgres@h/db'
    )
    assert redact("connection to host=h password=s3cret failed") == (
        "connection to host=h password=*** failed"
    )
    # libpq reads "a b@c" as the password "a b" and quotes that.
    assert redact('unexpected spaces found in "a b"', "postgresql://u:a b@c@h/db") == (
        'unexpected spaces found in "***"'
    )


def test_punctuation_after_a_url_in_a_message_is_not_part_of_it() -> None:
    """A message goes on after the URL ("the store ...:43213: refused"): read into the URL,
    the colon made its port unreadable and the whole endpoint was shown as hidden."""
    said = "cannot open sqlite:///m.db?objects=s3://b/p&endpoint=http://127.0.0.1:43213: refused."
    assert redact(said) == said
    assert redact("at postgresql://u:pw@h:5432/db.") == "at postgresql://u@h:5432/db."
