// Starts the vendored Swagger UI on /schema (no inline script: the page runs under the
// app's Content-Security-Policy). Requests tried out with the session cookie carry the
// CSRF cookie's value as X-CSRFToken, as every unsafe browser request must.

function csrfToken() {
  const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]*)/);
  return match ? decodeURIComponent(match[1]) : undefined;
}

const container = document.getElementById("swagger-container");
window.SwaggerUIBundle({
  url: container.dataset.specUrl,
  dom_id: "#swagger-container",
  deepLinking: true,
  presets: [window.SwaggerUIBundle.presets.apis, window.SwaggerUIStandalonePreset],
  requestInterceptor: (request) => {
    const token = csrfToken();
    if (token !== undefined) request.headers["X-CSRFToken"] = token;
    return request;
  },
});
