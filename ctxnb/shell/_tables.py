"""What command risk knows about programs: tables of names, and argument-list helpers.

:mod:`ctxnb.shell.risk` judges each simple command by these tables (read-only tools,
always-destructive programs, package managers, system paths …) after unwrapping
``sudo``, ``env``, ``timeout`` and the like (:func:`unwrap`, which trajectory replay
uses too to see which program a command runs).

Example:
    >>> unwrap(["sudo", "-u", "bob", "env", "A=1", "timeout", "5", "rm", "x"])
    ['rm', 'x']
"""

from __future__ import annotations

import re


def _w(words: str) -> list[str]:
    """A word list written as one string, to keep the long tables below readable."""
    return words.split()


_ASSIGN_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PYTHON_RE = re.compile(r"^(python|pypy)(\d+(\.\d+)*)?$|^py$")

_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "csh", "tcsh", "ash"})
_INTERPRETERS = _SHELLS | {"perl", "ruby", "node", "php", "lua", "deno", "bun", "Rscript"}
_DOWNLOADERS = frozenset({"curl", "wget", "fetch", "aria2c", "http", "https", "xh"})
_DOWNLOADER_RE = re.compile(r"(^|[\s(`|;&])(curl|wget|fetch|aria2c)\s")

_READ_ONLY = frozenset(
    """ls ll la dir cat tac head tail less more grep egrep fgrep rg ag ack wc echo printf
    pwd whoami id groups date cal uname hostname which whereis type file stat du df tree
    diff cmp comm cut tr nl column fold fmt paste join expand unexpand rev jq basename
    dirname realpath readlink printenv true false test [ [[ sleep seq md5sum sha1sum
    sha256sum sha512sum shasum cksum b2sum base64 xxd od hexdump strings ps pgrep free
    uptime history cd pushd popd export unset set alias help man info locale tty nproc
    getconf lsof lsblk whatis apropos dig nslookup host ping wait jobs sha224sum sha384sum
    awk gawk mawk zcat zgrep bzcat xzcat""".split()
)
# Tests, linters and formatters: they read the project and may rewrite files in it.
_DEV_TOOLS = frozenset(
    """pytest py.test ruff mypy pyright pylint flake8 pyflakes pycodestyle pydocstyle black
    isort bandit vulture radon coverage tsc eslint prettier shellcheck hadolint yamllint
    markdownlint codespell""".split()
)
_SAFE_PY_MODULES = frozenset(
    """pytest unittest doctest mypy ruff pyflakes pylint flake8 black isort py_compile
    compileall json.tool timeit pydoc tabnanny coverage site sysconfig platform this
    pycodestyle pydocstyle tokenize dis ast""".split()
)
_ALWAYS_DESTRUCTIVE = {
    "rm": "deletes files",
    "rmdir": "deletes directories",
    "unlink": "deletes a file",
    "shred": "overwrites and deletes files",
    "mv": "moves or renames files (the target is overwritten)",
    "dd": "writes raw data to files or devices",
    "truncate": "truncates files",
    "mkfs": "formats a file system",
    "mkswap": "formats a swap area",
    "fdisk": "changes partition tables",
    "sfdisk": "changes partition tables",
    "parted": "changes partition tables",
    "wipefs": "erases file system signatures",
    "killall": "kills processes by name",
    "pkill": "kills processes by name",
    "reboot": "reboots the machine",
    "shutdown": "shuts the machine down",
    "halt": "halts the machine",
    "poweroff": "powers the machine off",
    "crontab": "changes scheduled jobs",
}
_SYSTEM_PREFIXES = tuple(
    _w("""/etc /usr /bin /sbin /lib /lib32 /lib64 /libx32 /boot /dev /proc /sys /var /opt
    /root /srv /snap /System /Library /Applications /private /home /Users""")
)
_TEMP_PREFIXES = ("/tmp", "/var/tmp", "/private/tmp", "/dev/shm")
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "-"})

# Package managers: subcommand → destructive reason; SAFE subcommands; others unknown.
_PKG_INSTALL = frozenset(
    _w("""install i add uninstall remove rm un r erase purge update up upgrade reinstall
    downgrade dist-upgrade full-upgrade autoremove ci link unlink tap untap global dlx
    create sync inject get require del refresh self publish unpublish cleanup""")
)
_PKG_SAFE = frozenset(
    _w("""list ls ll show info search view freeze check help --version -v -V --help -h
    outdated why policy depends config doctor deps env audit test t build vet fmt clippy
    doc tree metadata inspect version query -Q""")
)
_PACKAGE_MANAGERS = frozenset(
    _w("""pip pip3 pipx npm yarn pnpm bun apt apt-get aptitude dnf yum zypper apk snap flatpak
    brew port cargo gem conda mamba micromamba go poetry composer pdm hatch rye nix-env""")
)


def _basename(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def unwrap(argv: list[str]) -> list[str]:
    """Strip wrappers (``sudo``, ``env``, ``nohup``, ``timeout 5`` …) and assignments."""
    for _ in range(16):
        while argv and _ASSIGN_RE.match(argv[0]):
            argv = argv[1:]
        if not argv:
            return argv
        name = _basename(argv[0])
        rest = argv[1:]
        if name in ("sudo", "doas"):
            inner = _skip_options(
                rest,
                set(_w("-u -g -C -D -h -p -r -t -U -T --user --group --chdir --prompt")),
            )
            if not inner:
                return argv  # judged as sudo itself
            argv = inner
        elif name == "env":
            inner = _skip_options(rest, {"-u", "--unset", "-C", "--chdir", "-S", "--split-string"})
            while inner and _ASSIGN_RE.match(inner[0]):
                inner = inner[1:]
            if not inner:
                return ["env"]
            argv = inner
        elif name in ("nohup", "builtin", "caffeinate", "chronic"):
            argv = rest
        elif name == "command":
            if rest[:1] and rest[0] in ("-v", "-V"):
                return ["type"]  # a lookup, not a run
            argv = _skip_options(rest, set())
        elif name == "exec":
            argv = _skip_options(rest, {"-a"})
        elif name == "time":
            argv = _skip_options(rest, {"-f", "--format", "-o", "--output"})
        elif name in ("nice", "ionice", "stdbuf", "chrt", "taskset"):
            argv = _skip_options(
                rest, {"-n", "--adjustment", "-c", "--class", "-i", "-o", "-e", "-p"}
            )
            if name in ("chrt", "taskset") and argv:
                argv = argv[1:]  # their first operand is a priority or mask
        elif name == "timeout":
            inner = _skip_options(rest, {"-s", "--signal", "-k", "--kill-after"})
            argv = inner[1:]  # the first operand is the duration
        elif name == "watch":
            argv = _skip_options(rest, {"-n", "--interval", "-d"})
        elif name == "xargs":
            inner = _skip_options(
                rest,
                set(
                    _w("-I -i -L -l -n -P -s -d -E -e -a --arg-file --delimiter --max-args")
                    + ["--max-procs", "--replace"]
                ),
            )
            return inner or ["echo"]  # xargs without a command runs echo
        else:
            return argv
    return argv


def _skip_options(args: list[str], takes_value: set[str]) -> list[str]:
    """Drop leading options (and the values of those in ``takes_value``)."""
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return args[i + 1 :]
        if not a.startswith("-") or a == "-":
            break
        if a in takes_value or (len(a) == 2 and a in takes_value):
            i += 2
            continue
        i += 1
    return args[i:]


def _reads_stdin(argv: list[str]) -> bool:
    """Whether an interpreter command runs code read from standard input."""
    if not argv:
        return False
    name = _basename(argv[0])
    if not (name in _INTERPRETERS or _PYTHON_RE.match(name)):
        return False
    # Options that take the code from the command line instead of standard input.
    code_flags = "c" if name in _SHELLS else ("cm" if _PYTHON_RE.match(name) else "e")
    for a in argv[1:]:
        if a in ("-s", "-"):
            return True
        if a.startswith("-") and not a.startswith("--"):
            if any(flag in a[1:] for flag in code_flags):
                return False
            continue
        if a.startswith("--"):
            continue
        return False  # a script file
    return True


def _positionals(args: list[str], takes_value: set[str] | None = None) -> list[str]:
    """Operands of a command: words that are not options (or option values)."""
    out: list[str] = []
    takes_value = takes_value or set()
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            out.extend(args[i + 1 :])
            break
        if a.startswith("-") and a != "-":
            i += 2 if a in takes_value else 1
            continue
        out.append(a)
        i += 1
    return out
