"""Adapters to AWS: the client factory, DynamoDB codecs and paging, SQS queues, and the table
and queue definitions shared with the CDK stack (plus provisioning them locally)."""
