"""`secure`: an MCP server that is also its own OAuth 2.1 authorization server, built with the
official `mcp` Python SDK (its `auth_server_provider`: discovery metadata, dynamic client
registration, `/authorize`, `/token` with PKCE and refresh), for the client's OAuth tests.

Authorization is granted without a login page: `/authorize` redirects straight back to the
client's redirect URI with a code, as a person's browser would after they agreed.

Tokens: the code exchange issues an access token for an hour; a refresh issues one for six
seconds (a client refreshes it after three, before it runs out), and rotates the refresh token.

Tools:
- `hello()`: "hello" (only reachable with a valid access token).
- `expire()`: revokes every access token issued so far (refresh tokens stay valid), as a
  server that ends sessions early does.

Every grant is recorded in `STATS` (a JSON file): how many authorizations, code exchanges
and refreshes there were, and every token issued (so a test can look for them in logs).

Usage: `python3 oauth_server.py streamable-http PORT STATS`.
"""

import json
import secrets
import sys
import time

from mcp.server import MCPServer
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

PORT = int(sys.argv[2])
STATS = sys.argv[3]
BASE = f"http://127.0.0.1:{PORT}"


class Provider:
    def __init__(self):
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.stats = {"registrations": 0, "authorizations": 0, "exchanges": 0, "refreshes": 0, "tokens": []}
        self.save()

    def save(self):
        with open(STATS, "w") as f:
            json.dump(self.stats, f)

    async def get_client(self, client_id):
        return self.clients.get(client_id)

    async def register_client(self, client_info):
        self.clients[client_info.client_id] = client_info
        self.stats["registrations"] += 1
        self.save()

    async def authorize(self, client, params: AuthorizationParams):
        code = secrets.token_urlsafe(24)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        self.stats["authorizations"] += 1
        self.save()
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client, authorization_code):
        code = self.codes.get(authorization_code)
        return code if code and code.client_id == client.client_id else None

    def issue(self, client_id, scopes, lifetime):
        access, refresh = "at-" + secrets.token_urlsafe(24), "rt-" + secrets.token_urlsafe(24)
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, expires_at=int(time.time()) + lifetime
        )
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes)
        self.stats["tokens"] += [access, refresh]
        self.save()
        return OAuthToken(
            access_token=access, expires_in=lifetime, scope=" ".join(scopes) or None, refresh_token=refresh
        )

    async def exchange_authorization_code(self, client, authorization_code):
        self.codes.pop(authorization_code.code, None)
        self.stats["exchanges"] += 1
        return self.issue(client.client_id, authorization_code.scopes, 3600)

    async def load_refresh_token(self, client, refresh_token):
        token = self.refresh.get(refresh_token)
        return token if token and token.client_id == client.client_id else None

    async def exchange_refresh_token(self, client, refresh_token, scopes):
        self.refresh.pop(refresh_token.token, None)
        self.stats["refreshes"] += 1
        return self.issue(client.client_id, scopes or refresh_token.scopes, 6)

    async def load_access_token(self, token):
        access = self.access.get(token)
        if access is None or (access.expires_at is not None and access.expires_at < time.time()):
            return None
        return access

    async def revoke_token(self, token):
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)


provider = Provider()
server = MCPServer(
    "secure",
    auth_server_provider=provider,
    auth=AuthSettings(
        issuer_url=BASE,
        resource_server_url=f"{BASE}/mcp",
        validate_token_resource=False,
        client_registration_options=ClientRegistrationOptions(enabled=True),
    ),
)


@server.tool()
def hello() -> str:
    """Say hello."""
    return "hello"


@server.tool()
def expire() -> str:
    """Revoke every access token issued so far."""
    provider.access.clear()
    return "expired"


if __name__ == "__main__":
    server.run(sys.argv[1], host="127.0.0.1", port=PORT)
