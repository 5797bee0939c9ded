import pytest

from tests.support import StaticHost


@pytest.mark.django_db(transaction=True)
def test_acquire_renew_release_takeover(clock):
    a = StaticHost("engine-a", clock)
    b = StaticHost("engine-b", clock)
    r = a.registry.acquire("wf-1")
    assert r.status == "acquired" and r.epoch == 1
    assert b.registry.acquire("wf-1").status == "lost-race"
    assert b.registry.acquire("wf-1").held_by == "engine-a"
    clock.advance(1000)
    out = a.registry.renew_all()
    assert [o.status for o in out] == ["renewed"]
    assert b.registry.takeover("wf-1").status == "not-expired"
    clock.advance(30_000 + 10_000 + 1)
    t = b.registry.takeover("wf-1")
    assert t.status == "acquired" and t.epoch == 2
    with pytest.warns(Warning):
        out = a.registry.renew_all()
    assert [o.status for o in out] == ["lost"]
    assert b.registry.release("wf-1").status == "released"
    assert a.registry.acquire("wf-1").epoch == 3
