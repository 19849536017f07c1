import attrs
import pytest

import halfway
from halfway.ir.errors import PassError
from halfway.passes import Pass, PassResult, get_pass, register_pass, registered_passes


@attrs.frozen
class CountOptions:
    limit: int = attrs.field(default=3, validator=attrs.validators.gt(0))


@register_pass("test_count_ops", options=CountOptions)
def count_ops(program, scope, options):
    """Counts ops, changes nothing."""
    n = len(program.global_block().ops)
    return PassResult(program, modified=False, stats={"ops": min(n, options.limit)})


@register_pass("test_needs_scope", needs_scope=True)
class NeedsScope(Pass):
    """Reads the scope."""

    def apply(self, program, scope):
        return PassResult(program, modified=False, stats={"entries": len(scope)})


@register_pass("test_bad_return")
def bad_return(program, scope, options):
    return program


def test_function_pass_runs_with_validated_options():
    program = halfway.Program()
    result = get_pass("test_count_ops", limit=5)(program)
    assert result.program is program and result.stats == {"ops": 0}
    with pytest.raises(PassError, match="test_count_ops.*valid options: limit"):
        get_pass("test_count_ops", limit=0)
    with pytest.raises(PassError, match="valid options: limit"):
        get_pass("test_count_ops", limt=1)


def test_class_pass_needs_scope():
    p = get_pass("test_needs_scope")
    with pytest.raises(PassError, match="test_needs_scope.*Scope"):
        p(halfway.Program())
    assert p(halfway.Program(), halfway.Scope({"w": __import__("numpy").zeros(1)})).stats == {"entries": 1}


def test_wrong_return_type_names_the_pass():
    with pytest.raises(PassError, match="test_bad_return.*returned Program"):
        get_pass("test_bad_return")(halfway.Program())


def test_duplicate_and_unknown_names():
    with pytest.raises(PassError, match="already registered"):
        register_pass("test_count_ops")(count_ops)
    register_pass("test_count_ops", options=CountOptions, override=True)(count_ops)
    with pytest.raises(PassError, match="no pass named 'nope'.*test_count_ops"):
        get_pass("nope")
    with pytest.raises(PassError, match="takes no options"):
        get_pass("test_needs_scope", x=1)


def test_listing():
    info = {p.name: p for p in registered_passes()}
    assert info["test_count_ops"].options == ("limit",)
    assert info["test_count_ops"].summary == "Counts ops, changes nothing."
    assert info["test_needs_scope"].needs_scope
