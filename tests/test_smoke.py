import threading
import time

import tenure


def test_acquire_release_roundtrip(client, r):
    lock = client.lock("orders:42")
    assert lock.acquire()
    assert lock.locked() and lock.owned() and lock.hold_count() == 1
    assert r.hgetall("orders:42") == {f"{client.client_id}:1".encode(): b"1"} or len(r.hgetall("orders:42")) == 1
    lock.release()
    assert not lock.locked()


def test_waiter_woken_by_release(client):
    lock = client.lock("w")
    lock.acquire()
    got = threading.Event()

    def waiter():
        t0 = time.monotonic()
        assert lock.acquire(timeout=5)
        got.set()
        lock.release()
        print("waited", time.monotonic() - t0)

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.2)
    lock.release()
    assert got.wait(2)
    t.join()
