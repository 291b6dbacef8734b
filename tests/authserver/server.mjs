// The authorization server of the authorization tests: oidc-provider on 127.0.0.1.
//
//   node server.mjs <config.json>
//
// config: {port, jwks: {keys: [private JWKs]}, clients: [...], resources: {"<resource URL>":
// {scope: "a b", format: "jwt" | "opaque"}}}. Issues access tokens for the resources
// (RFC 8707 resource indicators) by the client credentials grant, as JWTs (RFC 9068) or
// opaque tokens, and answers RFC 7662 introspection. Prints "ready <issuer>" once listening.
import { readFileSync } from 'node:fs';
import Provider, { errors } from 'oidc-provider';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const issuer = `http://127.0.0.1:${config.port}`;
const resources = config.resources;
const first = Object.keys(resources)[0];

const provider = new Provider(issuer, {
  clients: config.clients,
  jwks: config.jwks,
  scopes: ['openid', ...new Set(Object.values(resources).flatMap((r) => r.scope.split(' ')))],
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    introspection: {
      enabled: true,
      allowedPolicy: async (ctx, client) => client.clientId === 'mcp-server',
    },
    resourceIndicators: {
      enabled: true,
      defaultResource: async (ctx, client, oneOf) => oneOf ?? first,
      useGrantedResource: async () => true,
      getResourceServerInfo: async (ctx, resourceIndicator) => {
        const info = resources[resourceIndicator];
        if (!info) throw new errors.InvalidTarget();
        return {
          scope: info.scope,
          audience: resourceIndicator,
          accessTokenTTL: 600,
          accessTokenFormat: info.format,
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
  },
});

const server = provider.listen(config.port, '127.0.0.1', () => {
  console.log(`ready ${issuer}`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
