"""Settings: `McpSettings`, every knob of one endpoint, and its sections.

    mcp_settings  McpSettings: flat fields, from keyword arguments and `MCP_*` variables;
                  their checks; the sections made from them
    sections      RuntimeSettings, ResultSettings, InputSettings, BusSettings,
                  LimitSettings, LegacySettings, TaskSettings (and auth's AuthSettings):
                  what each subsystem is given, alone

Imports only the layers below it (auth for `AuthSettings` and the JWT rules, http for
the response modes).
"""

from mcp_asgi.settings.mcp_settings import (
    RENAMED,
    VERIFIER_SETTINGS,
    McpSettings,
    changed,
    normalize_path,
)
from mcp_asgi.settings.sections import (
    BusSettings,
    InputSettings,
    LegacySettings,
    LimitSettings,
    ResultSettings,
    RuntimeSettings,
    TaskSettings,
)

__all__ = [
    "RENAMED",
    "VERIFIER_SETTINGS",
    "BusSettings",
    "InputSettings",
    "LegacySettings",
    "LimitSettings",
    "McpSettings",
    "ResultSettings",
    "RuntimeSettings",
    "TaskSettings",
    "changed",
    "normalize_path",
]
