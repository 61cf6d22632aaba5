"""Object stores and tracking servers a training job reads and writes: AWS S3 through botocore
(boto3, s3fs, s3transfer), Google Cloud Storage through google-api-core, Azure Blob Storage
through azure-core, MLflow's REST client, and git-lfs.

Each client words a network failure and a refusal apart, and the two mean different things:
a connection that could not be made, a read that timed out, a throttled or 5xx answer is
transient (botocore's own retry tables call those codes transient or throttling; the error in
the log means its retries ran out), while missing credentials, access denied or a missing
key/bucket/blob fails the same way every time: the job's configuration (code_error).
"""
from __future__ import annotations

from boxagent.triage.vocab.table import lit, rx

BOTO = ("botocore 1.34 botocore/exceptions.py (EndpointConnectionError 'Could not connect to the "
        "endpoint URL: \"{endpoint_url}\"', ConnectTimeoutError, ReadTimeoutError, "
        "ConnectionClosedError, NoCredentialsError 'Unable to locate credentials', ClientError "
        "'An error occurred ({error_code}) when calling the {operation_name} operation...')")
BOTO_RETRY = ("botocore 1.34 botocore/retries/standard.py (_TRANSIENT_ERROR_CODES, "
              "_THROTTLED_ERROR_CODES); AWS S3 API reference 2006-03-01 Error responses "
              "(AccessDenied, NoSuchKey, NoSuchBucket, InvalidAccessKeyId, SignatureDoesNotMatch)")
GAPI = ("google-api-core 2.19 google/api_core/exceptions.py (ServiceUnavailable 503, "
        "InternalServerError 500, BadGateway 502, GatewayTimeout 504, TooManyRequests 429, "
        "DeadlineExceeded, RetryError; Forbidden 403, NotFound 404, Unauthorized 401, "
        "PermissionDenied); google-auth 2.29 google/auth/exceptions.py DefaultCredentialsError")
AZ = ("azure-core 1.30 azure/core/exceptions.py (ServiceRequestError, ServiceResponseError, "
      "ClientAuthenticationError, ResourceNotFoundError); Azure Storage REST API 2023-11-03 "
      "Blob service error codes (ErrorCode:ServerBusy, OperationTimedOut, AuthenticationFailed, "
      "AuthorizationPermissionMismatch, BlobNotFound, ContainerNotFound)")
MLFLOW = ("mlflow 2.12 mlflow/utils/rest_utils.py (\"API request to {url} failed with exception "
          "{e}\", \"API request to endpoint {endpoint} failed with error code {code} != 200\")")
WANDB = ("wandb 0.17 wandb/sdk/wandb_login.py / wandb/errors (UsageError \"api_key not configured "
         "(no-tty). call wandb.login(key=[your_api_key])\")")
LFS = ("git-lfs 3.5 lfshttp/errors.go / tq/transfer_queue.go (\"This repository is over its data "
       "quota\"), commands/command_smudge.go (\"Smudge error: Error downloading %s (%s)\")")

_N = "network_transient"
_S = False

ROWS = (
    # AWS S3 (botocore)
    lit(_N, "Could not connect to the endpoint URL",
        "botocore.exceptions.EndpointConnectionError: Could not connect to the endpoint URL: "
        "\"https://my-bucket.s3.us-east-1.amazonaws.com/ckpt/step-1000.pt\"", BOTO, "botocore"),
    rx(_N, r"(Connect|Read) timeout on endpoint URL",
       "botocore.exceptions.ReadTimeoutError: Read timeout on endpoint URL: "
       "\"https://s3.amazonaws.com/my-bucket/data/shard-0001.tar\"", BOTO,
       ("timeout on endpoint URL",), "botocore"),
    lit(_N, "Connection was closed before we received a valid response from endpoint URL",
        "botocore.exceptions.ConnectionClosedError: Connection was closed before we received a "
        "valid response from endpoint URL: \"https://s3.amazonaws.com/b/k\".", BOTO, "botocore"),
    rx(_N, r"An error occurred \((SlowDown|RequestTimeout|RequestTimeoutException|"
       r"ServiceUnavailable|InternalError|Throttling|ThrottlingException|RequestLimitExceeded|"
       r"TooManyRequestsException|BandwidthLimitExceeded|500|502|503|504)\) when calling the",
       "botocore.exceptions.ClientError: An error occurred (SlowDown) when calling the PutObject "
       "operation (reached max retries: 4): Please reduce your request rate.", BOTO_RETRY,
       ("An error occurred (",), "botocore"),
    lit("code_error", "Unable to locate credentials",
        "botocore.exceptions.NoCredentialsError: Unable to locate credentials", BOTO, "botocore"),
    rx("code_error", r"An error occurred \((AccessDenied|NoSuchKey|NoSuchBucket|InvalidAccessKeyId|"
       r"SignatureDoesNotMatch|ExpiredToken|InvalidToken|AllAccessDisabled|403|404)\) when calling the",
       "botocore.exceptions.ClientError: An error occurred (NoSuchKey) when calling the GetObject "
       "operation: The specified key does not exist.", BOTO_RETRY, ("An error occurred (",),
       "botocore"),
    # Google Cloud Storage (google-api-core, google-auth)
    rx(_N, r"google\.api_core\.exceptions\.(ServiceUnavailable|InternalServerError|BadGateway|"
       r"GatewayTimeout|TooManyRequests|DeadlineExceeded|RetryError)",
       "google.api_core.exceptions.ServiceUnavailable: 503 GET https://storage.googleapis.com/"
       "download/storage/v1/b/my-bucket/o/shard-7.tar?alt=media: Backend Error", GAPI,
       ("google.api_core.exceptions.",), "google-api-core"),
    rx("code_error", r"google\.api_core\.exceptions\.(Forbidden|NotFound|Unauthorized|"
       r"PermissionDenied)",
       "google.api_core.exceptions.Forbidden: 403 GET https://storage.googleapis.com/storage/v1/b/"
       "my-bucket/o/x: sa@p.iam.gserviceaccount.com does not have storage.objects.get access to "
       "the Google Cloud Storage object.", GAPI, ("google.api_core.exceptions.",),
       "google-api-core"),
    lit("code_error", "DefaultCredentialsError",
        "google.auth.exceptions.DefaultCredentialsError: Your default credentials were not found.",
        GAPI, "google-auth"),
    # Azure Blob Storage (azure-core)
    rx(_N, r"azure\.core\.exceptions\.(ServiceRequestError|ServiceResponseError)",
       "azure.core.exceptions.ServiceResponseError: ('Connection aborted.', "
       "ConnectionResetError(104, 'Connection reset by peer'))", AZ, ("azure.core.exceptions.",),
       "azure-core"),
    rx(_N, r"ErrorCode:(ServerBusy|OperationTimedOut|InternalError)",
       "ErrorCode:ServerBusy", AZ, ("ErrorCode:",), "azure-storage"),
    rx("code_error", r"azure\.core\.exceptions\.(ClientAuthenticationError|ResourceNotFoundError)",
       "azure.core.exceptions.ResourceNotFoundError: The specified blob does not exist.", AZ,
       ("azure.core.exceptions.",), "azure-core"),
    rx("code_error", r"ErrorCode:(AuthenticationFailed|AuthorizationPermissionMismatch|"
       r"AuthorizationFailure|BlobNotFound|ContainerNotFound)",
       "ErrorCode:AuthorizationPermissionMismatch", AZ, ("ErrorCode:",), "azure-storage"),
    # MLflow's tracking client
    rx(_N, r"API request to .* failed with (exception|error code 5[0-9][0-9])",
       "mlflow.exceptions.MlflowException: API request to http://mlflow:5000/api/2.0/mlflow/runs/"
       "log-batch failed with exception HTTPConnectionPool(host='mlflow', port=5000): Max retries "
       "exceeded", MLFLOW, ("API request to ",), "mlflow"),
    # Weights & Biases without a key (its network errors are http.py's)
    lit("code_error", "api_key not configured (no-tty)",
        "wandb: ERROR api_key not configured (no-tty). call wandb.login(key=[your_api_key])", WANDB,
        "wandb"),
    # git-lfs
    lit("code_error", "This repository is over its data quota",
        "batch response: This repository is over its data quota. Account responsible for LFS "
        "bandwidth should purchase more data packs to restore access.", LFS, "git-lfs"),
    lit(_N, "Smudge error: Error downloading",
        "Error downloading object: model.safetensors (a1b2c3d): Smudge error: Error downloading "
        "model.safetensors (a1b2c3d): batch request: read tcp: connection reset by peer", LFS,
        "git-lfs", _S),
)
