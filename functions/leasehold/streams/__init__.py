"""The jobs table's change stream: job state events from committed rows (issue 24).

:mod:`.relay` turns stream records (NEW_AND_OLD_IMAGES, as a Lambda event source mapping or
``GetRecords`` hands them over) into job state events; :mod:`.poller` runs it locally over
the emulator's ``dynamodbstreams`` from a persisted checkpoint.
"""
