/** The environment variables ebr reads (and etcd-druid sets), and what reads them here. */
export interface EbrVariable {
  name: string;
  meaning: string;
  here: string;
}

export const EBR_ENVIRONMENT: readonly EbrVariable[] = [
  {
    name: 'STORAGE_CONTAINER',
    meaning: 'the bucket or container when `--store-container` is not given',
    here: 'the same, read by etcdbrctl into the `--store` URL',
  },
  {
    name: 'SOURCE_STORAGE_CONTAINER',
    meaning: "the copy's source container when `--source-store-container` is not given",
    here: 'the same, into the `--from` URL',
  },
  {
    name: 'HOME',
    meaning: 'a `Local` store lives in `$HOME/<container>/<prefix>` (ebr v0.25 and later)',
    here: "the same (without HOME, the user's home in /etc/passwd); the image gives uid 65532 `/home/nonroot`, where etcd-druid mounts Local buckets",
  },
  {
    name: 'POD_NAME',
    meaning: 'the member Lease is named after the pod',
    here: 'the same (with the member name prefix of the etcd config file, below)',
  },
  {
    name: 'POD_NAMESPACE',
    meaning: 'namespace of the member and snapshot Leases',
    here: 'the same; compact reads it for the full-snapshot Lease',
  },
  {
    name: 'ETCD_CONF',
    meaning: "etcd's config file (default `/var/etcd/config/etcd.conf.yaml`): the member name prefix and peer URLs",
    here: 'read by the sidecar for the member Lease name and its peer-TLS annotation, and served by /config for etcd-wrapper (the default of --etcd-config-file)',
  },
  {
    name: 'AWS_APPLICATION_CREDENTIALS, AWS_APPLICATION_CREDENTIALS_JSON',
    meaning: 'S3 credentials: a folder of one-value files, or one JSON file',
    here: 'the same files and fields (docs/stores.md)',
  },
  {
    name: 'GOOGLE_APPLICATION_CREDENTIALS',
    meaning: 'GCS service account JSON file',
    here: 'the same',
  },
  {
    name: 'AZURE_APPLICATION_CREDENTIALS, AZURE_APPLICATION_CREDENTIALS_JSON',
    meaning: 'Azure Blob credentials: a folder of one-value files, or one JSON file',
    here: 'the same',
  },
  {
    name: 'OPENSTACK_APPLICATION_CREDENTIALS, ALICLOUD_APPLICATION_CREDENTIALS, OPENSHIFT_APPLICATION_CREDENTIALS',
    meaning: 'Swift, OSS and OCS credentials: a folder of one-value files, or one JSON file (`_JSON`)',
    here: 'the same files and fields (docs/stores.md)',
  },
  {
    name: 'OS_* (OS_AUTH_URL, OS_USERNAME, OS_PASSWORD, OS_PROJECT_NAME, OS_REGION_NAME, ...), ECS_*',
    meaning: "Swift's credentials as OpenStack's variables; Dell ECS's endpoint and keys",
    here: 'the same variables (docs/stores.md)',
  },
  {
    name: 'SOURCE_<provider>_APPLICATION_CREDENTIALS[_JSON]',
    meaning: "the copy's source credentials",
    here: 'the same',
  },
];
