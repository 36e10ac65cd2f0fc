import pytest

from nmt.errors import NmtError
from nmt.setup.registry import Registry


def test_get_unknown_lists_names_and_suggests():
    r: Registry[type] = Registry("widget")
    r.register("local_p")(int)
    r.register("global")(str)
    assert r.get("global") is str
    with pytest.raises(NmtError, match=r"did you mean 'local_p'.*valid: global, local_p"):
        r.get("lokal_p")


def test_double_registration_is_a_bug():
    r: Registry[type] = Registry("widget")
    r.register("a")(int)
    with pytest.raises(ValueError):
        r.register("a")(str)
