import gc

import pytest

from lib.gcpause import gc_paused


def test_the_collector_is_paused_inside_and_resumes_after_even_on_an_error():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():  # nested: the inner exit leaves it paused
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ValueError), gc_paused():
        raise ValueError("boom")
    assert gc.isenabled()


def test_as_a_decorator_and_a_collector_already_off_stays_off():
    @gc_paused()
    def work():
        return gc.isenabled()

    assert work() is False and gc.isenabled()
    gc.disable()
    try:
        assert work() is False
        assert not gc.isenabled()
    finally:
        gc.enable()
