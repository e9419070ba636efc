"""Credentials and account: STS GetCallerIdentity in the stack's region."""
from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError, NoCredentialsError

from tools.stack import AWS_ERRORS, CREDENTIALS_HINT, one_line

from .result import Result

CHECK = "credentials"


def check_identity(sts: Any, region: str) -> Result:
    """GetCallerIdentity needs no permission ("No permissions are required to perform this
    operation", botocore 1.44.5 data/sts/2011-06-15/service-2.json.gz): an error from STS itself means the
    credentials were rejected, a verified negative. Not reaching STS is "could not verify"."""
    try:
        identity = sts.get_caller_identity()
    except NoCredentialsError:
        return Result("FAIL", CHECK, "no AWS credentials found", CREDENTIALS_HINT)
    except ClientError as error:
        return Result("FAIL", CHECK, f"credentials rejected by STS: {one_line(error)}", CREDENTIALS_HINT)
    except AWS_ERRORS as error:
        return Result("WARN", CHECK, f"could not verify: {one_line(error)}", "check network access to STS")
    return Result("PASS", CHECK, f"account {identity['Account']} as {identity['Arn']}; stack region {region}")
