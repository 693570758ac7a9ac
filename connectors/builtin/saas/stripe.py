"""Stripe: customers, payments, invoices, subscriptions and refunds, from Stripe's OpenAPI
document (``documents/stripe.json.gz``: the pinned subset of stripe/openapi, see
``documents/README.md``). Credentials: the secret key as a bearer token (or as the Basic
user name). Lists fetch every page with ``starting_after``. Base URL:
``https://api.stripe.com``, or the setting ``stripe.api_url``."""

from __future__ import annotations

from connectors.builtin.saas.curated import curated, document

OPERATIONS = {
    "get_customers": "Stripe: list customers",
    "get_customers_customer": "Stripe: get a customer",
    "post_customers": "Stripe: create a customer",
    "post_customers_customer": "Stripe: update a customer",
    "get_charges": "Stripe: list charges",
    "get_payment_intents": "Stripe: list payment intents",
    "post_payment_intents": "Stripe: create a payment intent",
    "get_invoices": "Stripe: list invoices",
    "get_subscriptions": "Stripe: list subscriptions",
    "post_refunds": "Stripe: create a refund",
}

definition, connector = curated(
    "stripe",
    "Stripe",
    document("stripe.json.gz"),
    OPERATIONS,
    credential_labels={
        "bearerAuth": "Stripe secret key (bearer)",
        "basicAuth": "Stripe secret key (Basic)",
    },
    icon="credit-card",
    docs_url="https://docs.stripe.com/api",
)
