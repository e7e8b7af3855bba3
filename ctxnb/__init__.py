"""ctxnb: the layer between an LLM coding agent and a workspace.

It decides what the agent may touch, remembers every version of what it has seen,
assembles what is in its context window at each turn, and records why every change to
the code was made.

Example:
    >>> import tempfile, pathlib, ctxnb
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "app.py").write_text("print('hello')\\n")
    >>> ws = ctxnb.Workspace.open(root)
    >>> ws.index().created
    1

The public names are imported lazily, so ``import ctxnb`` is cheap and the command
line hook path never loads pandas or pyarrow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._util.lazy import lazy_exports
from ._version import __version__
from .errors import (
    ConfigError,
    CorruptStoreError,
    CtxnbError,
    CycleError,
    MissingDependencyError,
    NotFoundError,
    PatchConflict,
    PatchError,
    PolicyError,
    RegistryError,
    ResolverError,
    SandboxError,
    SelectionError,
    StaleFileError,
    StoreError,
    TamperedTraceError,
    TaskError,
    TaskFormatError,
    TaskRepoError,
)
from .hashing import content_hash, identity_hash, source_hash, stable_stringify

# name -> module that defines it; resolved on first attribute access.
_LAZY: dict[str, str] = {
    "Access": "ctxnb.access.door",
    "AllRules": "ctxnb.instructions",
    "Approver": "ctxnb.govern.approval",
    "Backend": "ctxnb.tools.backend",
    "DiffResult": "ctxnb.tools.results",
    "Observation": "ctxnb.access.observe",
    "ResumeReport": "ctxnb.session.core",
    "VersionInfo": "ctxnb.tools.results",
    "ApprovalRequest": "ctxnb.govern.approval",
    "CallbackApprover": "ctxnb.govern.approval",
    "CompactReport": "ctxnb.store.objectstore",
    "Context": "ctxnb.context",
    "MetaEntry": "ctxnb.context",
    "Section": "ctxnb.context",
    "ContextItem": "ctxnb.context",
    "ContextChange": "ctxnb.context",
    "PrefixReuse": "ctxnb.context",
    "prefix_reuse": "ctxnb.context",
    "ContextStrategy": "ctxnb.strategies.builtin",
    "Decision": "ctxnb.govern.approval",
    "FileTools": "ctxnb.tools.filetools",
    "FileViewLimits": "ctxnb.strategies.builtin",
    "HeuristicTokenCounter": "ctxnb.llm.tokens",
    "HookEngine": "ctxnb.govern.engine",
    "KeepAll": "ctxnb.strategies.builtin",
    "MetadataOnly": "ctxnb.strategies.builtin",
    "ObservationMasking": "ctxnb.strategies.builtin",
    "ModelPrice": "ctxnb.llm.prices",
    "MergeProposal": "ctxnb.tools.merging",
    "PatchResult": "ctxnb.tools.results",
    "PriceTable": "ctxnb.llm.prices",
    "PathPolicy": "ctxnb.access.fdio",
    "QueueApprover": "ctxnb.govern.approval",
    "ReadResult": "ctxnb.tools.results",
    "SearchHits": "ctxnb.tools.results",
    "RecencyWindow": "ctxnb.strategies.builtin",
    "RelationStore": "ctxnb.context.relations",
    "RulesIndex": "ctxnb.instructions",
    "RulesTiered": "ctxnb.strategies.builtin",
    "RulesTracker": "ctxnb.instructions",
    "Sandbox": "ctxnb.sandbox.runner",
    "CommandEffects": "ctxnb.sandbox.commit",
    "EngineCommands": "ctxnb.sandbox.commands",
    "WorkspaceBackend": "ctxnb.integrations.backend",
    "Selection": "ctxnb.strategies.builtin",
    "Session": "ctxnb.session.core",
    "StrategyInput": "ctxnb.strategies.builtin",
    "TokenBudgetLRU": "ctxnb.strategies.builtin",
    "TokenCounter": "ctxnb.llm.tokens",
    "TraceLedger": "ctxnb.govern.ledger",
    "Watcher": "ctxnb.session.watch",
    "copy_sample_workspace": "ctxnb.samples",
    "extract_markdown_links": "ctxnb.retrieval.markdown_links",
    "init_governance": "ctxnb.govern.intents",
    "load_trace": "ctxnb.analysis",
    "ChatObject": "ctxnb.model",
    "CtxnbConfig": "ctxnb.config",
    "FileObject": "ctxnb.model",
    "FilesystemResolver": "ctxnb.resolver",
    "FilesystemSource": "ctxnb.model",
    "IndexReport": "ctxnb.indexer",
    "IndexResult": "ctxnb.indexer",
    "MountMapping": "ctxnb.resolver",
    "ObjectStore": "ctxnb.store.objectstore",
    "SessionObject": "ctxnb.model",
    "SystemPromptObject": "ctxnb.model",
    "ToolCallObject": "ctxnb.model",
    "TxRecord": "ctxnb.store.objectstore",
    "Version": "ctxnb.store.objectstore",
    "WhyResult": "ctxnb.govern.why",
    "AuthoredVersion": "ctxnb.govern.authors",
    "Workspace": "ctxnb.workspace",
    "default_filesystem_id": "ctxnb.resolver",
    "doc_path": "ctxnb.resolver",
    "index_deletion": "ctxnb.indexer",
    "index_file": "ctxnb.indexer",
    "index_tree": "ctxnb.indexer",
    "load_config": "ctxnb.config",
}

__all__ = sorted(
    [
        "ConfigError",
        "CorruptStoreError",
        "CycleError",
        "CtxnbError",
        "MissingDependencyError",
        "NotFoundError",
        "PatchConflict",
        "PatchError",
        "PolicyError",
        "RegistryError",
        "ResolverError",
        "SandboxError",
        "SelectionError",
        "StaleFileError",
        "StoreError",
        "TamperedTraceError",
        "TaskError",
        "TaskFormatError",
        "TaskRepoError",
        "__version__",
        "content_hash",
        "identity_hash",
        "source_hash",
        "stable_stringify",
        *_LAZY,
    ]
)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .access.door import Access
    from .access.fdio import PathPolicy
    from .access.observe import Observation
    from .analysis import load_trace
    from .config import CtxnbConfig, load_config
    from .context import Context, ContextChange, ContextItem, MetaEntry, Section
    from .context.relations import RelationStore
    from .govern.approval import (
        ApprovalRequest,
        Approver,
        CallbackApprover,
        Decision,
        QueueApprover,
    )
    from .govern.authors import AuthoredVersion
    from .govern.engine import HookEngine
    from .govern.intents import init_governance
    from .govern.ledger import TraceLedger
    from .govern.why import WhyResult
    from .indexer import IndexReport, IndexResult, index_deletion, index_file, index_tree
    from .instructions import AllRules, RulesIndex, RulesTracker
    from .integrations.backend import WorkspaceBackend
    from .llm.tokens import HeuristicTokenCounter, TokenCounter
    from .model import (
        ChatObject,
        FileObject,
        FilesystemSource,
        SessionObject,
        SystemPromptObject,
        ToolCallObject,
    )
    from .resolver import FilesystemResolver, MountMapping, default_filesystem_id, doc_path
    from .retrieval.markdown_links import extract_markdown_links
    from .samples import copy_sample_workspace
    from .sandbox.commands import EngineCommands
    from .sandbox.commit import CommandEffects
    from .sandbox.runner import Sandbox
    from .session.core import ResumeReport, Session
    from .session.watch import Watcher
    from .store.objectstore import CompactReport, ObjectStore, TxRecord, Version
    from .strategies.builtin import (
        ContextStrategy,
        FileViewLimits,
        KeepAll,
        MetadataOnly,
        ObservationMasking,
        RecencyWindow,
        RulesTiered,
        Selection,
        StrategyInput,
        TokenBudgetLRU,
    )
    from .tools.backend import Backend
    from .tools.filetools import FileTools
    from .tools.merging import MergeProposal
    from .tools.results import DiffResult, PatchResult, ReadResult, SearchHits, VersionInfo
    from .workspace import Workspace
