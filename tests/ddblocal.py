"""AWS's DynamoDB Local for the tests: the launcher ``leasehold dev --dynamodb local`` uses
too (:mod:`leasehold.local.dynamodb_local`), here under the name the tests know it by."""

from leasehold.local.dynamodb_local import (
    DEFAULT_DIR,
    INNER_PORT,
    DynamoDBLocal,
    Router,
    Unavailable,
    find_jar,
    install_dir,
    shared,
    start,
)

__all__ = ["DEFAULT_DIR", "INNER_PORT", "DynamoDBLocal", "Router", "Unavailable", "find_jar",
           "install_dir", "shared", "start"]
