// @hey-api/openapi-ts configuration of tests/integration/test_generated_typescript_client.py
// (run in a folder holding the document as openapi.json): the fetch client, the types and
// the SDK, with the document validated first (its findings are printed, and fail the test).
export default {
  input: "openapi.json",
  output: "client",
  parser: { validate_EXPERIMENTAL: true },
  plugins: ["@hey-api/client-fetch", "@hey-api/typescript", "@hey-api/sdk"],
};
