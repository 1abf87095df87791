"""The garbage collector pause around pricing (app.http.collector.collector_paused)."""
import gc
import threading

from app.http.collector import collector_paused


def test_the_collector_is_off_inside_and_back_after():
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_nested_and_concurrent_pauses_end_with_the_last_one():
    inside, release = threading.Event(), threading.Event()

    def other_pricing():
        with collector_paused():
            inside.set()
            release.wait(5)

    thread = threading.Thread(target=other_pricing)
    with collector_paused():
        thread.start()
        assert inside.wait(5)
    assert not gc.isenabled()  # the other pricing still runs
    release.set()
    thread.join(5)
    assert gc.isenabled()


def test_a_failing_pricing_gives_the_collector_back():
    try:
        with collector_paused():
            raise ValueError("boom")
    except ValueError:
        pass
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off():
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
