"""Held-out redaction shapes (#43): where credentials sit that no rule or test was written for.

This spec was written before the argument grammars and credential-file readers of #43,
and it is never used to tune them: the rules are written against the cases of
``tests/redaction/test_redact_formats.py``, which use other tools, other files and other
spellings of the same families. Figures measured here (``bench/redact.py``,
``tests/redaction/test_redact_heldout.py``) are figures of redaction on shapes it has
not seen.

The families are those the #43 review found leaking: secrets passed as command-line
arguments of database, directory and transfer clients; credential files of common
clients; SQL that sets a password; secrets inside JSON and notebook escapes; kubeconfig;
cookies and credentials in logged HTTP headers; ``.properties`` continuations and
separators; string concatenation and assignment in more languages; URLs escaped inside
JSON or percent-encoded; vendor tokens glued to an identifier by ``_``. Beside them sit
look-alikes of the kinds gitleaks and Betterleaks test against (hashes, UUIDs, base64 of
ordinary text, file paths, camelCase identifiers) and the same families without a
secret (a prompt for the password, a variable, a placeholder).

Every value is drawn from a seeded random source, and token prefixes are assembled from
parts, so nothing here is a real credential or looks like one to a scanner.

``heldout_shapes()`` returns ``(secrets, lookalikes)``: each case is one file with the
exact values that must not survive (``secrets``) or none (a look-alike must come back
byte for byte).
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass
from urllib.parse import quote

AL = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
B64 = AL + "+/"
URLS = AL + "_-"


@dataclass(frozen=True)
class Shape:
    """One file: what it is, its name, its text, the values that must disappear."""

    kind: str
    name: str
    text: str
    secrets: tuple[str, ...] = ()


class _Draw:
    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    def s(self, n: int, alphabet: str = AL) -> str:
        """A random string with at least one digit and one letter (when both can be)."""
        while True:
            v = "".join(self.r.choice(alphabet) for _ in range(n))
            letters = any(c.isalpha() for c in alphabet)
            digits = any(c.isdigit() for c in alphabet)
            if (not letters or any(c.isalpha() for c in v)) and (
                not digits or any(c.isdigit() for c in v)
            ):
                return v

    def human(self) -> str:
        """A password a person chose: two words, digits, one symbol."""
        words = ["cobalt", "meadow", "lantern", "pepper", "saturn", "willow", "glacier"]
        a, b = self.r.sample(words, 2)
        return f"{a.capitalize()}{self.r.choice('!#%+')}{b}{self.r.randrange(100, 999)}"

    def b64(self, raw: str) -> str:
        return base64.b64encode(raw.encode()).decode()


def heldout_shapes(seed: int = 4343) -> tuple[list[Shape], list[Shape]]:
    """The held-out secrets and look-alikes."""
    g = _Draw(seed)
    sec: list[Shape] = []
    look: list[Shape] = []

    def add(kind: str, name: str, text: str, *secrets: str) -> None:
        sec.append(Shape(kind, name, text, secrets))

    def alike(kind: str, name: str, text: str) -> None:
        look.append(Shape(kind, name, text))

    ghp = "gh" + "p_"
    glpat = "gl" + "pat-"
    sk_live = "sk" + "_live_"
    # --- command lines of database, directory and transfer clients --------------------
    v = g.s(14)
    add("mysql-long-quoted", "dump.sh", f"mysql --user=root --password='{v}' -h db shop\n", v)
    v = g.s(12)
    add("mysqladmin-attached", "ping.sh", f"mysqladmin -u root -p{v} status\n", v)
    v = g.s(13)
    add(
        "ldapsearch-w",
        "ldap.sh",
        f'ldapsearch -x -H ldap://dir -D "cn=admin,dc=corp,dc=lan" -w {v} -b dc=corp\n',
        v,
    )
    v = g.human()
    add("ldapwhoami-w-quoted", "who.sh", f"ldapwhoami -x -D uid=ops,ou=people -w '{v}'\n", v)
    v = g.s(16)
    add("redis-cli-pass", "redis.sh", f"redis-cli -h cache.lan -p 6380 --pass {v} INFO\n", v)
    v = g.s(12)
    add(
        "mongodump-p",
        "backup.sh",
        f"mongodump -u backup -p {v} --authenticationDatabase admin --out /bk\n",
        v,
    )
    v = g.s(15)
    add("sqlcmd-P", "q.cmd", f'sqlcmd -S tcp:sql01,1433 -U sa -P {v} -Q "SELECT 1"\n', v)
    v = g.s(11)
    add("curl-user-long", "api.sh", f"curl --user deploy:{v} https://ci.lan/api/v4/jobs\n", v)
    v = g.s(12)
    add(
        "wget-http-password",
        "get.sh",
        f"wget --http-user=ci --http-password={v} https://x.lan/a\n",
        v,
    )
    v = g.s(10)
    add("smbclient-percent", "smb.sh", f"smbclient //fs01/share -U alice%{v} -c ls\n", v)
    v = g.s(12)
    add("rabbitmqadmin-p", "mq.sh", f"rabbitmqadmin -u guest -p {v} list queues\n", v)
    v = g.s(14)
    add(
        "openssl-passout",
        "pfx.sh",
        f"openssl pkcs12 -export -in a.crt -passout pass:{v} -out a.p12\n",
        v,
    )
    v = g.s(12)
    add(
        "vault-login-userpass",
        "vault.sh",
        f"vault login -method=userpass username=ops password={v}\n",
        v,
    )
    v = g.s(13)
    add(
        "psql-env-prefix-quoted",
        "run.sh",
        f'PGPASSWORD="{v}" pg_dump -h db -U app app > a.sql\n',
        v,
    )
    v = g.s(12)
    add("influx-password", "influx.sh", f"influx -host tsdb -username admin -password {v}\n", v)
    # --- credential files of common clients ---------------------------------------------
    v = g.s(16)
    add("pgpass", ".pgpass", f"db.internal:5432:app:app:{v}\n", v)
    v = g.s(14)
    add("my-cnf", ".my.cnf", f"[client]\nuser=root\npassword={v}\nhost=127.0.0.1\n", v)
    v = g.s(15)
    add("netrc-one-line", ".netrc", f"machine api.corp.lan login bot password {v}\n", v)
    v = g.b64(g.s(12))
    add(
        "npmrc-password",
        ".npmrc",
        f"//registry.corp.lan/:username=ci\n//registry.corp.lan/:_password={v}\n",
        v,
    )
    v = g.b64("ci:" + g.s(12))
    add(
        "docker-config-auths",
        "config.json",
        json.dumps({"auths": {"registry.corp.lan": {"auth": v}}}, indent="\t") + "\n",
        v,
    )
    v = g.s(32)
    add("gem-credentials", "credentials", f"---\n:rubygems_api_key: rubygems_{v}\n", v)
    v = g.s(32)
    add("cargo-credentials", "credentials.toml", f'[registries.corp]\ntoken = "{v}"\n', v)
    v = g.s(20)
    add(
        "s3cfg",
        ".s3cfg",
        f"[default]\naccess_key = {g.s(20, string.ascii_uppercase)}\nsecret_key = {v}\n",
        v,
    )
    v = g.s(14)
    add("pg-service", "pg_service.conf", f"[app]\nhost=db\ndbname=app\nuser=app\npassword={v}\n", v)
    # --- SQL that sets a password -------------------------------------------------------
    v = g.s(12)
    add("sql-alter-identified", "grant.sql", f"ALTER USER app IDENTIFIED BY '{v}';\n", v)
    v = g.human()
    add("sql-create-user-host", "users.sql", f"CREATE USER 'app'@'%' IDENTIFIED BY \"{v}\";\n", v)
    v = g.s(14)
    add(
        "sql-alter-role",
        "roles.sql",
        f"ALTER ROLE reporting WITH LOGIN PASSWORD '{v}' VALID UNTIL 'infinity';\n",
        v,
    )
    v = g.s(12)
    add("sql-set-password", "fix.sql", f"SET PASSWORD FOR 'ops'@'localhost' = '{v}';\n", v)
    v = g.s(16)
    add(
        "sql-mssql-login",
        "login.sql",
        f"CREATE LOGIN etl WITH PASSWORD = '{v}', CHECK_POLICY = OFF;\n",
        v,
    )
    v = g.s(12)
    add("sql-lowercase", "seed.sql", f"create user svc identified by {v};\n", v)
    # --- JSON and notebook escapes -------------------------------------------------------
    v = g.s(24)
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": 1,
                "metadata": {},
                "outputs": [],
                "source": ["import client\n", f'c = client.Client(api_key="{v}")\n'],
            }
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    add("ipynb-source-kwarg", "explore.ipynb", json.dumps(nb, indent=1) + "\n", v)
    v = g.s(18)
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": 2,
                "metadata": {},
                "outputs": [
                    {"name": "stdout", "output_type": "stream", "text": [f"logged in, token={v}\n"]}
                ],
                "source": ["login()"],
            }
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    add("ipynb-output-stream", "run.ipynb", json.dumps(nb, indent=1) + "\n", v)
    v = g.s(16)
    add(
        "json-escaped-url",
        "hook.json",
        json.dumps({"target": f"https://svc:{v}@hooks.corp.lan/in"}).replace("/", "\\/") + "\n",
        v,
    )
    v = g.s(14)
    add(
        "percent-encoded-url",
        "redirect.log",
        f"GET /login?next={quote(f'https://ops:{v}@admin.lan/', safe='')} 302\n",
        v,
    )
    v = g.s(20)
    add(
        "json-string-holding-env",
        "task.json",
        json.dumps({"cmd": f'export VAULT_TOKEN="{v}" && ./run'}) + "\n",
        v,
    )
    # --- kubeconfig --------------------------------------------------------------------
    v = g.s(40, URLS)
    add(
        "kubeconfig-token",
        "kubeconfig",
        "apiVersion: v1\nkind: Config\nusers:\n- name: ci\n  user:\n"
        f"    token: {v}\ncontexts: []\n",
        v,
    )
    v = g.s(120, B64)
    add(
        "kubeconfig-client-key-data",
        "config",
        "users:\n- name: admin\n  user:\n    client-certificate-data: "
        f"{g.b64('cert')}\n    client-key-data: {v}\n",
        v,
    )
    v = g.s(14)
    add(
        "kubeconfig-basic",
        "admin.conf",
        f"users:\n- name: admin\n  user:\n    username: admin\n    password: {v}\n",
        v,
    )
    # --- HTTP headers and cookies in logs ----------------------------------------------
    v = g.s(32, URLS)
    add(
        "cookie-session",
        "access.log",
        f"> GET / HTTP/1.1\n> Cookie: theme=dark; sessionid={v}\n",
        v,
    )
    v = g.s(40, URLS)
    add(
        "set-cookie-auth",
        "resp.txt",
        f"HTTP/1.1 200 OK\nSet-Cookie: auth_token={v}; Path=/; HttpOnly; Secure\n",
        v,
    )
    v = g.s(36, URLS)
    add("curl-verbose-bearer", "debug.log", f"> authorization: Bearer {v}\n> accept: */*\n", v)
    v = g.s(26)
    add("x-vault-token", "req.http", f"POST /v1/kv HTTP/1.1\nX-Vault-Token: {v}\n", v)
    v = g.s(24)
    add("apikey-header-python", "call.py", f'headers = {{"Api-Key": "{v}", "Accept": "json"}}\n', v)
    # --- .properties separators and continuations --------------------------------------
    v = g.s(14)
    add(
        "properties-space-separator",
        "mail.properties",
        f"mail.smtp.host smtp.lan\nmail.smtp.password {v}\n",
        v,
    )
    a, b = g.s(8), g.s(8)
    add(
        "properties-continuation",
        "db.properties",
        f"db.url=jdbc:h2:mem\ndb.password=\\\n    {a}\\\n    {b}\n",
        a,
        b,
    )
    # --- assignments and concatenation in more languages --------------------------------
    a, b = g.s(9), g.s(9)
    add("kotlin-concat", "Keys.kt", f'val clientSecret = "{a}" + "{b}"\n', a, b)
    v = g.s(18)
    add("c-define", "config.h", f'#define API_TOKEN "{v}"\n', v)
    v = g.s(20)
    add("rust-const", "lib.rs", f'const AUTH_TOKEN: &str = "{v}";\n', v)
    a, b = g.s(9), g.s(9)
    add("lua-concat", "conf.lua", f'local password = "{a}" .. "{b}"\n', a, b)
    a, b = g.s(9), g.s(9)
    add("vb-concat", "Db.vb", f'Dim password As String = "{a}" & "{b}"\n', a, b)
    v = g.s(14)
    add("r-arrow", "load.R", f'db_password <- "{v}"\n', v)
    v = g.s(14)
    add("perl-my", "sync.pl", f"my $api_secret = '{v}';\n", v)
    a, b = g.s(9), g.s(9)
    add("sql-concat", "v.sql", f"SELECT set_config('app.secret', '{a}' || '{b}', false);\n", a, b)
    # --- vendor tokens glued by "_" -------------------------------------------------------
    v = ghp + g.s(36)
    add("token-after-underscore", "notes.txt", f"backup_key_{v}\n", v)
    v = glpat + g.s(20)
    add("gitlab-after-underscore", "ci.env", f"CI_PUSH={'deploy_' + v}\n", v)
    v = sk_live + g.s(24)
    add("stripe-after-underscore", "pay.txt", f"old_{v} rotated\n", v)

    # ======================= look-alikes (must stay byte for byte) =====================
    alike("mysql-prompt", "db.sh", "mysql -u root -p shop < schema.sql\n")
    alike("mysql-password-var", "db.sh", 'mysql -u root -p"$MYSQL_PASSWORD" shop\n')
    alike("ldap-prompt-W", "ldap.sh", "ldapsearch -x -D cn=admin,dc=corp -W -b dc=corp\n")
    alike("ldap-password-file", "ldap.sh", "ldapsearch -x -D cn=admin -y /run/secrets/ldap\n")
    alike("redis-cli-env", "r.sh", 'redis-cli -a "$REDIS_PASSWORD" ping\n')
    alike("curl-user-no-pass", "c.sh", "curl -u deploy https://ci.lan/api\n")
    alike("curl-user-vars", "c.sh", 'curl -u "$CI_USER:$CI_PASS" https://ci.lan/api\n')
    alike("sqlcmd-env", "q.cmd", 'sqlcmd -S sql01 -U sa -P %SA_PASSWORD% -Q "SELECT 1"\n')
    alike("psql-W", "p.sh", "psql -h db -U app -W app\n")
    alike(
        "openssl-passout-env", "pfx.sh", "openssl pkcs12 -export -passout env:PFX_PASS -out a.p12\n"
    )
    alike("pgpass-wildcards", ".pgpass", "db.internal:5432:*:app:*\n")
    alike("netrc-no-password", ".netrc", "machine github.com login octocat\n")
    alike(
        "docker-config-credstore",
        "config.json",
        json.dumps({"auths": {"ghcr.io": {}}, "credsStore": "desktop"}) + "\n",
    )
    alike("sql-identified-var", "u.sql", "ALTER USER app IDENTIFIED BY :'app_password';\n")
    alike(
        "sql-password-column",
        "q.sql",
        "SELECT user_name, password_hash FROM users WHERE id = 42;\n",
    )
    alike(
        "sql-identified-with-plugin",
        "u.sql",
        "CREATE USER 'app'@'%' IDENTIFIED WITH auth_socket;\n",
    )
    alike(
        "kubeconfig-paths",
        "kubeconfig",
        "users:\n- name: ci\n  user:\n    client-certificate: /etc/k8s/ci.crt\n"
        "    client-key: /etc/k8s/ci.key\n",
    )
    alike(
        "kubeconfig-exec",
        "kubeconfig",
        "users:\n- name: eks\n  user:\n    exec:\n      command: aws\n"
        "      args: [eks, get-token]\n",
    )
    alike(
        "cookie-preferences", "access.log", "> Cookie: theme=dark; lang=en-GB; tz=Europe/London\n"
    )
    alike("set-cookie-locale", "resp.txt", "Set-Cookie: locale=en-US; Path=/; Max-Age=31536000\n")
    alike(
        "request-id-header",
        "resp.txt",
        f"X-Request-Id: {g.s(8, HEX)}-{g.s(4, HEX)}-{g.s(4, HEX)}-{g.s(4, HEX)}-{g.s(12, HEX)}\n",
    )
    alike("etag-header", "resp.txt", f'ETag: W/"{g.s(40, HEX)}"\n')
    alike(
        "content-md5",
        "resp.txt",
        f"Content-MD5: {base64.b64encode(bytes(g.r.randrange(256) for _ in range(16))).decode()}\n",
    )
    alike("properties-password-ref", "app.properties", "db.password=${DB_PASSWORD}\n")
    alike("properties-password-empty", "app.properties", "mail.smtp.password=\n")
    alike(
        "ipynb-env-lookup",
        "nb.ipynb",
        json.dumps({"cells": [{"cell_type": "code", "source": ['key = os.environ["API_KEY"]\n']}]})
        + "\n",
    )
    alike(
        "ipynb-getpass",
        "nb.ipynb",
        json.dumps(
            {
                "cells": [
                    {"cell_type": "code", "source": ['password = getpass.getpass("Password: ")\n']}
                ]
            }
        )
        + "\n",
    )
    alike("git-sha", "log.txt", f"commit {g.s(40, HEX)}\nAuthor: Ada <ada@corp.lan>\n")
    alike("sha256-line", "SHA256SUMS", f"{g.s(64, HEX)}  ctxnb-0.1.0.tar.gz\n")
    alike(
        "uuid-assignment",
        "ids.py",
        f'REQUEST_ID = "{g.s(8, HEX)}-{g.s(4, HEX)}-4{g.s(3, HEX)}-a{g.s(3, HEX)}-'
        f'{g.s(12, HEX)}"\n',
    )
    alike(
        "base64-of-text",
        "msg.json",
        json.dumps({"body": g.b64("The quick brown fox jumps over the lazy dog again and again")})
        + "\n",
    )
    alike(
        "base64-of-text-yaml",
        "cm.yaml",
        f"data:\n  motd: {g.b64('Welcome to the build farm, be nice to each other')}\n",
    )
    alike(
        "file-path-long",
        "build.log",
        "linking /usr/lib/x86_64-linux-gnu/libcrypto.so.3 into /opt/app/bin/server\n",
    )
    alike("file-path-token-word", "tree.txt", "src/auth/tokenStore/refreshTokenRotation.ts\n")
    alike(
        "camelcase-identifiers",
        "auth.ts",
        "const tokenRefreshHandler = createSecretManagerClient(authConfig);\n",
    )
    alike(
        "camelcase-getter",
        "Auth.java",
        "String value = credentialsProvider.getSecretAccessKeyForRegion(region);\n",
    )
    alike(
        "snake-identifiers",
        "auth.py",
        "password_reset_token_ttl = settings.PASSWORD_RESET_TOKEN_TTL\n",
    )
    alike("token-type-bearer", "oauth.py", 'token_type = "Bearer"\n')
    alike("api-key-header-name", "cfg.py", 'API_KEY_HEADER = "X-Api-Key"\n')
    alike("secret-name-k8s", "deploy.yaml", "envFrom:\n  - secretRef:\n      name: app-secrets\n")
    alike("password-min-length", "policy.ini", "[policy]\npassword_min_length = 14\n")
    alike(
        "env-reference-notebook-escaped",
        "cfg.json",
        json.dumps({"cmd": 'export TOKEN="$CI_TOKEN"'}) + "\n",
    )
    alike(
        "url-no-credentials-escaped",
        "hook.json",
        json.dumps({"u": "https://hooks.corp.lan/in?id=7"}).replace("/", "\\/") + "\n",
    )
    alike(
        "version-strings", "lock.txt", "tokenizers==0.20.3\nsecretstorage==3.3.3\nkeyring==25.5.0\n"
    )
    alike("css-and-colors", "app.css", ".token{color:#1f2a3b}.secret-banner{background:#abcdef}\n")
    return sec, look
