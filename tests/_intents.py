"""The intents files tests write into governed workspaces, one per family of tests."""

ENGINE_INTENTS = """\
active_intents:
  - id: INT-001
    name: Inventory reorder rules
    status: active
    owned_scope: ["inventory/**", "tests/**"]
    constraints: ["Money stays in integer cents"]
    acceptance_criteria: ["python -m pytest -q passes"]
  - id: INT-002
    name: Web page polish
    status: active
    owned_scope: ["web/**"]
  - id: INT-OLD
    name: Finished work
    status: done
    owned_scope: ["**"]
"""

PATCH_INTENTS = """\
active_intents:
  - id: INT-001
    name: Inventory
    status: active
    owned_scope: ["inventory/**"]
"""
