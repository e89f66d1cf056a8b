"""models.boundary: a store function's driver errors come out as kickoff's (no database needed)."""

from __future__ import annotations

import peewee
import pytest

from config.errors import ConstraintViolation, DatabaseRefused, DatabaseUnavailable, KickoffError
from models.boundary import translate_database_errors, translate_database_refusals


def _raising(exc: Exception):
    def store_function() -> None:
        raise exc

    return store_function


def test_a_lost_connection_is_database_unavailable():
    with pytest.raises(DatabaseUnavailable, match="server closed the connection"):
        translate_database_errors(_raising(peewee.OperationalError("server closed the connection")))()


def test_a_broken_unique_key_is_a_constraint_violation():
    with pytest.raises(ConstraintViolation, match="duplicate key value") as caught:
        translate_database_errors(_raising(peewee.IntegrityError("duplicate key value violates unique")))()
    assert isinstance(caught.value.__cause__, peewee.IntegrityError)
    assert isinstance(caught.value, KickoffError)


def test_other_refusals_pass_unless_the_store_translates_refusals_too():
    data_error = peewee.DataError('invalid input syntax for type uuid: "x"')
    with pytest.raises(peewee.DataError):
        translate_database_errors(_raising(data_error))()
    with pytest.raises(DatabaseRefused, match="invalid input syntax"):
        translate_database_refusals(_raising(data_error))()
    with pytest.raises(DatabaseUnavailable):
        translate_database_refusals(_raising(peewee.OperationalError("timeout expired")))()


def test_a_translated_function_keeps_its_name_and_answer():
    @translate_database_errors
    def rows_of_nothing() -> list[int]:
        """Doc."""
        return [1]

    assert rows_of_nothing() == [1]
    assert rows_of_nothing.__name__ == "rows_of_nothing"
    assert rows_of_nothing.__doc__ == "Doc."
