"""Policy option values parsed as the kubelet parses them, with its error texts.

``cpuManagerPolicyOptions`` and ``topologyManagerPolicyOptions`` are string maps
whose values the kubelet reads with Go's ``strconv.ParseBool`` and
``strconv.Atoi`` (``pkg/kubelet/cm/cpumanager/policy_options.go``,
``pkg/kubelet/cm/topologymanager/policy_options.go``). Both managers' option
parsers use these two functions, so an invalid value reads the same whichever
manager it belongs to. YAML booleans and integers are accepted as well.
"""

from __future__ import annotations

import re

from agent.alloc.errors import OptionsError

__all__ = ["parse_bool_option", "parse_int_option"]

_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}
#: What Go's ``strconv.Atoi`` accepts: an optional sign and ASCII decimal digits.
_DECIMAL = re.compile(r"[+-]?[0-9]+")


def parse_bool_option(name: str, value: object) -> bool:
    """Go's ``strconv.ParseBool`` accepted spellings; YAML booleans are accepted too.

    Raises:
        OptionsError: ``value`` is not one of the spellings; the message names the option.
    """
    if isinstance(value, bool):
        return value
    text = str(value)
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise OptionsError(f'bad value for option "{name}": strconv.ParseBool: parsing "{text}": invalid syntax')


def parse_int_option(name: str, value: object) -> int:
    """Go's ``strconv.Atoi`` on the value's text (a YAML integer is accepted, a boolean is not).

    Raises:
        OptionsError: ``value`` is not an optionally signed run of ASCII digits; the message names the option.
    """
    text = str(value)
    if isinstance(value, bool) or not _DECIMAL.fullmatch(text):
        raise OptionsError(f'bad value for option "{name}": strconv.Atoi: parsing "{text}": invalid syntax')
    return int(text)
